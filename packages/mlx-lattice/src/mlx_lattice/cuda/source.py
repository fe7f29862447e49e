"""CUDA C++ bodies of mlx_lattice's device kernels, compiled by MLX (``mx.fast.cuda_kernel``).

MLX generates each kernel's signature: every input ``name`` becomes
``const T* name`` and every output ``T* name`` (``int32_t``, ``float``,
``__half``, ``__nv_bfloat16``), in that order, then pastes the body below into
``__global__ void custom_kernel_<name>(...)`` inside ``namespace mlx::core::cu``.
Sizes travel in a small int32 ``meta`` input so that one compiled kernel
serves every problem size; only dtypes and tile shapes are template
arguments.  ``tests/test_cuda_source.py`` wraps each body in that signature
and compiles it with ``nvcc`` where one is installed.

Kernels:

* ``lt_hash_build``: open-addressing table of row indices, keyed by the
  full int32 coordinate row (``atomicCAS`` on ``-1`` slots, linear probing,
  load factor at most 1/2), so no coordinate range is assumed.
* ``lt_gen_unique`` / ``lt_gen_first`` / ``lt_gen_compact``: a generated
  support (strided, full, transposed convs) in three launches and no sort:
  every (input row, tap) candidate output row is computed in the kernel that
  needs it (never stored), inserted into a hash table where each distinct row
  is represented by its first candidate, ranked, and written out in
  first-occurrence order together with the output's own hash table and, for
  the relations whose pairs are exactly the candidates (full, transposed),
  the neighbour table itself.
* ``lt_hash_query``: the neighbour table ``nbr[k, o]`` of one relation:
  input row ``c = (o * mul + off_k) / div`` (exact division on every axis,
  in int64, so positions outside int32 miss), or -1; a symmetric
  submanifold relation searches half its taps and mirrors the rest.
* ``lt_tap_mask``: each output row's tap mask, by which a map's rows are
  sorted so that the rows of a conv tile share their taps.
* ``lt_invert``: the adjoint table ``inv[k, c] = o``; within a tap each
  relation is one-to-one, so this is a plain scatter.
* ``lt_conv``: output-stationary gather-GEMM: a 64-row by 64-channel tile of
  ``y = bias + sum_k x[nbr[k, o]] @ W_k``, products summed in f32 by FFMA
  (never TF32), taps no row of the tile reaches skipped.
* ``lt_conv_mma``: the same product on the tensor cores for f16 and bf16
  (PTX ``mma.sync`` m16n8k16, f32 accumulators; no header beyond
  ``cuda_fp16.h``), when both channel counts are multiples of 8 so that rows
  load as 16-byte vectors: a two-stage ``cp.async`` pipeline over the taps
  that reach the tile, gathering the next stage while the tensor cores
  multiply the current one.
* ``lt_conv_wgrad``: ``dW_k = sum_o x[nbr[k, o]]^T dy[o]``, a 64x64 tile of
  one tap per block over a slab of rows, added into an f32 result with
  ``atomicAdd``.
* ``lt_pool`` / ``lt_pool_share`` / ``lt_pool_grad``: the sparse pools over
  the same neighbour tables: one thread per output element reduces its
  present taps in f32 (max propagates NaN; avg divides by the count of
  present inputs; a row with none gives 0), and the gradient walks the
  adjoint table, a max's gradient split evenly among the inputs equal to
  the maximum (``lt_pool_share`` first counts them).  No atomics: every
  result is deterministic.
"""

from __future__ import annotations

HEADER = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>

__device__ __forceinline__ unsigned int lt_hash4(int4 c) {
  unsigned long long a = ((unsigned long long)(unsigned int)c.y << 32) | (unsigned int)c.z;
  unsigned long long b = ((unsigned long long)(unsigned int)c.w << 32) | (unsigned int)c.x;
  unsigned long long h = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull);
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 33;
  return (unsigned int)h;
}

__device__ __forceinline__ bool lt_same(int4 a, int4 b) {
  return a.x == b.x && a.y == b.y && a.z == b.z && a.w == b.w;
}

// Candidate i of a generated support: input row i / V through tap i % V, the
// output row it reaches (batch, x, y, z; logical, in the output's stride).
// meta: [P, V, mask, family, s x3, p x3, out_stride x3, ...]; family 0: the
// coarsened support (o = floor(c / s), V = 1), 1: full (o = (c + p - t) / s
// where exact on every axis), 2: transposed (o = c s - p + t), with t the
// tap's offset. False when the tap reaches no row, or when the row's physical
// coordinates leave int32 (then `wide` is set: the layer's error, not a miss).
__device__ __forceinline__ bool lt_candidate(const int* logical, const int* taps,
                                             const int* meta, int i, int4& out, bool& wide) {
  const int v = meta[1];
  const int family = meta[3];
  const int row = i / v;
  const int k = i - row * v;
  const int4 c = reinterpret_cast<const int4*>(logical)[row];
  const int cv[3] = {c.y, c.z, c.w};
  long long ov[3];
  bool exact = true;
  #pragma unroll
  for (int a = 0; a < 3; ++a) {
    const long long s = meta[4 + a];
    const long long t = taps[k * 3 + a];
    const long long x = cv[a];
    if (family == 0) {
      ov[a] = x / s - ((x % s != 0 && x < 0) ? 1 : 0);  // floor division
    } else if (family == 2) {
      ov[a] = x * s - meta[7 + a] + t;
    } else {
      const long long num = x + meta[7 + a] - t;
      exact = exact && (num % s == 0);
      ov[a] = num / s;
    }
  }
  wide = false;
  if (!exact) return false;
  #pragma unroll
  for (int a = 0; a < 3; ++a) {
    const long long phys = ov[a] * meta[10 + a];
    if (phys < -2147483648ll || phys > 2147483647ll) wide = true;
  }
  out = make_int4(c.x, (int)ov[0], (int)ov[1], (int)ov[2]);
  return !wide;
}

__device__ __forceinline__ float lt_f(float v) { return v; }
__device__ __forceinline__ float lt_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float lt_f(__nv_bfloat16 v) { return __bfloat162float(v); }

// One m16n8k16 tensor-core product, f32 accumulators (PTX mma.sync; the
// overload's last argument only selects the operand type).
__device__ __forceinline__ void lt_mma(float (&d)[4], const unsigned (&a)[4],
                                       const unsigned (&b)[2], __half) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void lt_mma(float (&d)[4], const unsigned (&a)[4],
                                       const unsigned (&b)[2], __nv_bfloat16) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// 16-byte asynchronous copy global -> shared (sm_80+); `bytes` = 0 writes zeros.
__device__ __forceinline__ void lt_cp16(void* dst, const void* src, int bytes) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void lt_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void lt_cp_wait_one() { asm volatile("cp.async.wait_group 1;\n" ::); }
__device__ __forceinline__ void lt_cp_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

template <typename T> __device__ __forceinline__ T lt_to(float v);
template <> __device__ __forceinline__ float lt_to<float>(float v) { return v; }
template <> __device__ __forceinline__ __half lt_to<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 lt_to<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
"""

# inputs: coords (N, 4) int32 logical rows; meta [N, mask]
# outputs: table (mask + 1,) int32, initialised to -1
HASH_BUILD = r"""
  const int n = meta[0];
  const unsigned int mask = (unsigned int)meta[1];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int4* rows = reinterpret_cast<const int4*>(coords);
  const int4 c = rows[i];
  unsigned int h = lt_hash4(c) & mask;
  while (true) {
    const int prev = atomicCAS(table + h, -1, i);
    if (prev == -1 || lt_same(rows[prev], c)) return;
    h = (h + 1) & mask;
  }
"""

# A generated support, step 1: every candidate's distinct output row into a
# hash table whose slots end holding the smallest candidate index with that
# row (atomicCAS to claim, atomicMin among equals), so which candidate
# represents a row does not depend on thread timing. A stored index's row is
# recomputed from the input row and tap (lt_candidate), never stored.
# inputs: logical (N, 4) int32 input rows, taps (V, 3) int32, meta (lt_candidate's)
# outputs: table (mask + 1,) int32, wide (1,) int32 (> 0: a row left int32); both -1 first
GEN_UNIQUE = r"""
  const int p = meta[0];
  const unsigned int mask = (unsigned int)meta[2];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p) return;
  int4 c;
  bool out_of_range;
  if (!lt_candidate(logical, taps, meta, i, c, out_of_range)) {
    if (out_of_range) atomicMax(wide, 1);
    return;
  }
  unsigned int h = lt_hash4(c) & mask;
  while (true) {
    const int prev = atomicCAS(table + h, -1, i);
    if (prev == -1) return;
    int4 other;
    bool unused;
    lt_candidate(logical, taps, meta, prev, other, unused);
    if (lt_same(other, c)) { atomicMin(table + h, i); return; }
    h = (h + 1) & mask;
  }
"""

# Step 2: each candidate's representative (-1 for no row), and whether it is one.
# inputs: logical, taps, table, meta; outputs: first (P,) int32, rep (P,) int32
GEN_FIRST = r"""
  const int p = meta[0];
  const unsigned int mask = (unsigned int)meta[2];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p) return;
  int r = -1;
  int4 c;
  bool out_of_range;
  if (lt_candidate(logical, taps, meta, i, c, out_of_range)) {
    unsigned int h = lt_hash4(c) & mask;
    while (true) {
      const int held = table[h];
      if (held < 0) break;
      int4 other;
      bool unused;
      lt_candidate(logical, taps, meta, held, other, unused);
      if (lt_same(other, c)) { r = held; break; }
      h = (h + 1) & mask;
    }
  }
  first[i] = (r == i) ? 1 : 0;
  rep[i] = r;
"""

# Step 3, after the inclusive prefix sum `rank` of `first` (output row of
# representative i: rank[i] - 1) and the host's read of the row count:
# the output rows (logical and physical), the output support's hash table
# (the deduplication table re-pointed at output rows), and with meta[14] = 1
# the neighbour table nbr[k, o] = input row (full and transposed relations).
# inputs: logical, taps, table, rep, rank (P,) int32, meta (lt_candidate's, then
#         [13] rows out M, [14] emit)
# outputs: rows (M, 4), coords (M, 4), out_table (mask + 1,), nbr (V, M) or (1,);
#          all -1 first
GEN_COMPACT = r"""
  const int p = meta[0];
  const int v = meta[1];
  const int size = meta[2] + 1;
  const int m = meta[13];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < size) {
    const int held = table[i];
    out_table[i] = held >= 0 ? rank[held] - 1 : -1;
  }
  if (i >= p) return;
  const int r = rep[i];
  if (r < 0) return;
  const int o = rank[r] - 1;
  if (r == i) {
    int4 c;
    bool unused;
    lt_candidate(logical, taps, meta, i, c, unused);
    reinterpret_cast<int4*>(rows)[o] = c;
    reinterpret_cast<int4*>(coords)[o] =
        make_int4(c.x, c.y * meta[10], c.z * meta[11], c.w * meta[12]);
  }
  if (meta[14]) nbr[(long long)(i % v) * m + o] = i / v;
"""

# With meta[8] = 1 (mirror: a submanifold relation of a support on itself whose
# offsets are symmetric, off[V-1-k] = -off[k]) only taps k <= V-1-k are
# searched: a pair o -> c of tap k is the pair c -> o of tap V-1-k, written
# by the same thread, and the centre tap is the identity (no search).
# inputs: table, coords (N, 4) table rows, queries (M, 4) logical output rows,
#         offs (V, 3) int32, meta [M, mask, mul x3, div x3, mirror, V]
# outputs: nbr (V, M) int32 (initialised to -1 when mirrored)
HASH_QUERY = r"""
  const int m = meta[0];
  const unsigned int mask = (unsigned int)meta[1];
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  const int k = blockIdx.y;
  if (o >= m) return;
  const int twin = meta[8] ? meta[9] - 1 - k : -1;
  if (twin == k) {
    nbr[(long long)k * m + o] = o;
    return;
  }
  const int4 q = reinterpret_cast<const int4*>(queries)[o];
  const int qv[3] = {q.y, q.z, q.w};
  int cv[3];
  bool ok = true;
  #pragma unroll
  for (int a = 0; a < 3; ++a) {
    long long v = (long long)qv[a] * meta[2 + a] + offs[k * 3 + a];
    const long long d = meta[5 + a];
    if (v % d != 0) ok = false;
    v /= d;
    if (v < -2147483648ll || v > 2147483647ll) ok = false;
    cv[a] = (int)v;
  }
  int found = -1;
  if (ok) {
    const int4 c = make_int4(q.x, cv[0], cv[1], cv[2]);
    const int4* rows = reinterpret_cast<const int4*>(coords);
    unsigned int h = lt_hash4(c) & mask;
    while (true) {
      const int r = table[h];
      if (r < 0) break;
      if (lt_same(rows[r], c)) { found = r; break; }
      h = (h + 1) & mask;
    }
  }
  nbr[(long long)k * m + o] = found;
  if (twin >= 0 && found >= 0) nbr[(long long)twin * m + found] = o;
"""

# Each output row's tap mask (bit k: tap k reaches the row), V <= 31.
# inputs: nbr (V, M), meta [M, V]; outputs: mask (M,) int32
TAP_MASK = r"""
  const int m = meta[0];
  const int v = meta[1];
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= m) return;
  int bits = 0;
  for (int k = 0; k < v; ++k)
    if (nbr[(long long)k * m + o] >= 0) bits |= 1 << k;
  mask[o] = bits;
"""

# inputs: nbr (V, M); meta [M, N]; outputs: inv (V, N) int32, initialised to -1
INVERT = r"""
  const int m = meta[0];
  const int n = meta[1];
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  const int k = blockIdx.y;
  if (o >= m) return;
  const int c = nbr[(long long)k * m + o];
  if (c >= 0) inv[(long long)k * n + c] = o;
"""

# Tile: BM = 64 output rows x BN = 64 output channels per block of 256 threads,
# BK = 16 input channels per step; thread (ty, tx) owns rows ty + 16 i and
# channels tx + 16 j (i, j < 4).
# With meta[4] = 1 the block's rows are order[m0 + i] instead of m0 + i
# (rows sorted by their tap masks, so that a tile's rows share taps and the
# taps no row of it reaches are skipped); y is written at those rows.
# inputs: x (N, Cin) T, w (V, Cin, Cout) TW, bias (Cout,) f32, nbr (V, M),
#         order (M,) or (1,) int32, meta [M, V, Cin, Cout, sorted]
# outputs: y (M, Cout) T
CONV = r"""
  constexpr int BM = 64, BN = 64, BK = 16;
  __shared__ float As[BK][BM + 4];
  __shared__ float Bs[BK][BN + 4];
  __shared__ int rows[BM];
  __shared__ int out_rows[BM];
  const int m = meta[0], nv = meta[1], cin = meta[2], cout = meta[3];
  const int t = threadIdx.x;
  const int tx = t % 16, ty = t / 16;
  const int m0 = blockIdx.x * BM;
  const int n0 = blockIdx.y * BN;
  if (t < BM) out_rows[t] = m0 + t < m ? (meta[4] ? order[m0 + t] : m0 + t) : -1;
  __syncthreads();
  float acc[4][4];
  #pragma unroll
  for (int i = 0; i < 4; ++i)
    #pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
  for (int k = 0; k < nv; ++k) {
    int mine = -1;
    if (t < BM && out_rows[t] >= 0) mine = nbr[(long long)k * m + out_rows[t]];
    if (t < BM) rows[t] = mine;
    if (!__syncthreads_or(mine >= 0)) continue;
    for (int c0 = 0; c0 < cin; c0 += BK) {
      // A tile: 64 rows x 16 channels, 4 per thread, stored transposed.
      {
        const int r = t / 4, cc = (t % 4) * 4;
        const int src = rows[r];
        #pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int c = c0 + cc + u;
          As[cc + u][r] = (src >= 0 && c < cin) ? lt_f(x[(long long)src * cin + c]) : 0.f;
        }
      }
      // B tile: 16 input channels x 64 output channels.
      {
        const int kk = t / 16, jj = (t % 16) * 4;
        const int c = c0 + kk;
        #pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int j = n0 + jj + u;
          Bs[kk][jj + u] =
              (c < cin && j < cout) ? lt_f(w[((long long)k * cin + c) * cout + j]) : 0.f;
        }
      }
      __syncthreads();
      #pragma unroll
      for (int kk = 0; kk < BK; ++kk) {
        float a[4], b[4];
        #pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];
        #pragma unroll
        for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx + 16 * j];
        #pragma unroll
        for (int i = 0; i < 4; ++i)
          #pragma unroll
          for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
      __syncthreads();
    }
  }
  #pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = out_rows[ty + 16 * i];
    if (r < 0) continue;
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = n0 + tx + 16 * j;
      if (c < cout) y[(long long)r * cout + c] = lt_to<T>(acc[i][j] + bias[c]);
    }
  }
"""

# Tensor-core variant for f16 / bf16 (T both for x and w), C_in and C_out
# multiples of 8.  Tile BM = 64 rows x BN = 64 channels, BK = 32 input
# channels per stage, 128 threads = 4 warps, each owning a 32 x 32 quarter as
# 2 x 4 m16n8k16 products (PTX mma.sync, fragment layouts of the PTX ISA).
# The block first lists the taps that reach any of its rows (at most
# MAX_TAPS); its stages are then (listed tap, 32-channel slice) pairs, loaded
# by cp.async into one of two shared buffers while the tensor cores work on
# the other, so the gathers' latency hides behind the products.  Rows with
# no input through a tap are zero-filled by the copy itself (source size 0).
# ``w`` comes as (V, Cout, Cin) so that B loads along k as well; the f32 tile
# goes through shared memory so the bias is added and the output written
# coalesced.
# Rows through ``order`` with meta[4] = 1, as in lt_conv.
# inputs: x (N, Cin) T, w (V, Cout, Cin) T, bias (Cout,) f32, nbr (V, M),
#         order (M,) or (1,) int32, meta [M, V, Cin, Cout, sorted] (V <= MAX_TAPS)
# outputs: y (M, Cout) T
CONV_MMA = r"""
  constexpr int BM = 64, BN = 64, BK = 32, LDS = BK + 8, LDC = BN + 4, MAX_TAPS = 512;
  __shared__ __align__(16) T As[2][BM * LDS];
  __shared__ __align__(16) T Bs[2][BN * LDS];
  __shared__ __align__(16) float Cs[BM * LDC];
  __shared__ short taps[MAX_TAPS];
  __shared__ int out_rows[BM];
  __shared__ int listed;
  const int m = meta[0], nv = meta[1], cin = meta[2], cout = meta[3];
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  const int g = lane / 4, q = lane % 4;
  const int wm = warp / 2, wn = warp % 2;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  if (t == 0) listed = 0;
  if (t < BM) out_rows[t] = m0 + t < m ? (meta[4] ? order[m0 + t] : m0 + t) : -1;
  __syncthreads();
  for (int k = 0; k < nv; ++k) {
    const int mine = (t < BM && out_rows[t] >= 0) ? nbr[(long long)k * m + out_rows[t]] : -1;
    if (__syncthreads_or(mine >= 0) && t == 0) taps[listed++] = (short)k;
  }
  __syncthreads();
  const int slices = (cin + BK - 1) / BK;
  const int stages = listed * slices;
  // Stage s into buffer b: 64 gathered rows and 64 weight rows, 32 channels each.
  auto load = [&](int s, int b) {
    const int k = taps[s / slices], c0 = (s % slices) * BK;
    #pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int idx = t + 128 * u;
      const int r = idx / 4, ch = (idx % 4) * 8, c = c0 + ch;
      const int src = out_rows[r] >= 0 ? nbr[(long long)k * m + out_rows[r]] : -1;
      const bool a_ok = src >= 0 && c < cin;
      lt_cp16(As[b] + r * LDS + ch, a_ok ? x + (long long)src * cin + c : x, a_ok ? 16 : 0);
      const int j = n0 + r;
      const bool b_ok = j < cout && c < cin;
      lt_cp16(Bs[b] + r * LDS + ch, b_ok ? w + ((long long)k * cout + j) * cin + c : w,
              b_ok ? 16 : 0);
    }
    lt_cp_commit();
  };
  float acc[2][4][4];
  #pragma unroll
  for (int i = 0; i < 2; ++i)
    #pragma unroll
    for (int j = 0; j < 4; ++j)
      #pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
  if (stages > 0) load(0, 0);
  for (int s = 0; s < stages; ++s) {
    const int b = s & 1;
    if (s + 1 < stages) {
      load(s + 1, b ^ 1);  // that buffer was released by the barrier ending stage s - 1
      lt_cp_wait_one();
    } else {
      lt_cp_wait_all();
    }
    __syncthreads();
    #pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned a[2][4], bf[4][2];
      #pragma unroll
      for (int i = 0; i < 2; ++i) {
        const T* base = As[b] + (wm * 32 + i * 16 + g) * LDS + kk + 2 * q;
        a[i][0] = *reinterpret_cast<const unsigned*>(base);
        a[i][1] = *reinterpret_cast<const unsigned*>(base + 8 * LDS);
        a[i][2] = *reinterpret_cast<const unsigned*>(base + 8);
        a[i][3] = *reinterpret_cast<const unsigned*>(base + 8 * LDS + 8);
      }
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        const T* base = Bs[b] + (wn * 32 + j * 8 + g) * LDS + kk + 2 * q;
        bf[j][0] = *reinterpret_cast<const unsigned*>(base);
        bf[j][1] = *reinterpret_cast<const unsigned*>(base + 8);
      }
      #pragma unroll
      for (int i = 0; i < 2; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) lt_mma(acc[i][j], a[i], bf[j], T());
    }
    __syncthreads();
  }
  #pragma unroll
  for (int i = 0; i < 2; ++i)
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = wm * 32 + i * 16 + g, c = wn * 32 + j * 8 + 2 * q;
      Cs[r * LDC + c] = acc[i][j][0];
      Cs[r * LDC + c + 1] = acc[i][j][1];
      Cs[(r + 8) * LDC + c] = acc[i][j][2];
      Cs[(r + 8) * LDC + c + 1] = acc[i][j][3];
    }
  __syncthreads();
  for (int idx = t; idx < BM * BN; idx += 128) {
    const int r = idx / BN, c = idx % BN;
    const int row = out_rows[r];
    if (row >= 0 && n0 + c < cout)
      y[(long long)row * cout + n0 + c] = lt_to<T>(Cs[r * LDC + c] + bias[n0 + c]);
  }
"""

# Weight gradient.  Block (slab, tap, tile): rows [slab * SLAB, + SLAB) of
# tap k, input channels i0 + [0, 64), output channels j0 + [0, 64).
# inputs: x (N, Cin) T, dy (M, Cout) T, nbr (V, M), meta [M, Cin, Cout, tiles_j]
# outputs: dw (V, Cin, Cout) f32, initialised to 0
WGRAD = r"""
  constexpr int BI = 64, BJ = 64, BR = 16, SLAB = 512;
  __shared__ float As[BR][BI + 4];
  __shared__ float Bs[BR][BJ + 4];
  __shared__ int rows[BR];
  const int m = meta[0], cin = meta[1], cout = meta[2], tiles_j = meta[3];
  const int k = blockIdx.y;
  const int i0 = (blockIdx.z / tiles_j) * BI;
  const int j0 = (blockIdx.z % tiles_j) * BJ;
  const int t = threadIdx.x;
  const int tx = t % 16, ty = t / 16;
  const int r_begin = blockIdx.x * SLAB;
  const int r_end = min(m, r_begin + SLAB);
  float acc[4][4];
  #pragma unroll
  for (int i = 0; i < 4; ++i)
    #pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
  for (int r0 = r_begin; r0 < r_end; r0 += BR) {
    int mine = -1;
    if (t < BR && r0 + t < r_end) mine = nbr[(long long)k * m + r0 + t];
    if (t < BR) rows[t] = mine;
    if (!__syncthreads_or(mine >= 0)) continue;
    {
      const int rr = t / 16, ii = (t % 16) * 4;
      const int src = rows[rr];
      #pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int c = i0 + ii + u;
        As[rr][ii + u] = (src >= 0 && c < cin) ? lt_f(x[(long long)src * cin + c]) : 0.f;
      }
      const int o = r0 + rr;
      #pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int j = j0 + ii + u;
        Bs[rr][ii + u] = (src >= 0 && j < cout) ? lt_f(dy[(long long)o * cout + j]) : 0.f;
      }
    }
    __syncthreads();
    #pragma unroll
    for (int rr = 0; rr < BR; ++rr) {
      float a[4], b[4];
      #pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[rr][ty + 16 * i];
      #pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Bs[rr][tx + 16 * j];
      #pragma unroll
      for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  #pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int c = i0 + ty + 16 * i;
    if (c >= cin) continue;
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int o = j0 + tx + 16 * j;
      if (o < cout && acc[i][j] != 0.f)
        atomicAdd(dw + ((long long)k * cin + c) * cout + o, acc[i][j]);
    }
  }
"""

# One thread per (row, channel) element; mode 0 max, 1 sum, 2 avg.
# inputs: x (N, C) T, nbr (V, M), meta [M, V, C, mode]; outputs: y (M, C) T
POOL = r"""
  const long long m = meta[0];
  const int v = meta[1], c = meta[2], mode = meta[3];
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= m * c) return;
  const long long o = i / c;
  const int ch = (int)(i - o * c);
  float acc = mode == 0 ? __int_as_float(0xff800000) : 0.f;  // -inf
  int n = 0;
  for (int k = 0; k < v; ++k) {
    const int src = nbr[(long long)k * m + o];
    if (src < 0) continue;
    const float val = lt_f(x[(long long)src * c + ch]);
    if (mode == 0) {
      if (acc == acc && (val != val || val > acc)) acc = val;  // NaN wins and stays
    } else {
      acc += val;
    }
    ++n;
  }
  if (n == 0) acc = 0.f;
  else if (mode == 2) acc /= (float)n;
  y[i] = lt_to<T>(acc);
"""

# The gradient share of each output element of a max pool: dy / (inputs equal to the maximum).
# inputs: x (N, C) T, y (M, C) T, dy (M, C) T, nbr (V, M), meta [M, V, C]
# outputs: share (M, C) f32
POOL_SHARE = r"""
  const long long m = meta[0];
  const int v = meta[1], c = meta[2];
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= m * c) return;
  const long long o = i / c;
  const int ch = (int)(i - o * c);
  const float best = lt_f(y[i]);
  int ties = 0;
  for (int k = 0; k < v; ++k) {
    const int src = nbr[(long long)k * m + o];
    if (src >= 0 && lt_f(x[(long long)src * c + ch]) == best) ++ties;
  }
  share[i] = ties > 0 ? lt_f(dy[i]) / (float)ties : 0.f;
"""

# Input gradient of a pool over the adjoint table: g is the share (max) or dy (sum, avg).
# inputs: x (N, C) T, y (M, C) T, g (M, C) TG, count (M,) int32 (avg), inv (V, N),
#         meta [N, V, C, mode]
# outputs: dx (N, C) T
POOL_GRAD = r"""
  const long long n = meta[0];
  const int v = meta[1], c = meta[2], mode = meta[3];
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n * c) return;
  const long long r = i / c;
  const int ch = (int)(i - r * c);
  const float xv = mode == 0 ? lt_f(x[i]) : 0.f;
  float acc = 0.f;
  for (int k = 0; k < v; ++k) {
    const int o = inv[(long long)k * n + r];
    if (o < 0) continue;
    const long long at = (long long)o * c + ch;
    if (mode == 0 && !(lt_f(y[at]) == xv)) continue;
    float g_o = lt_f(g[at]);
    if (mode == 2) g_o /= (float)max(count[o], 1);
    acc += g_o;
  }
  dx[i] = lt_to<T>(acc);
"""

KERNELS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "lt_hash_build": (("coords", "meta"), ("table",), HASH_BUILD),
    "lt_gen_unique": (("logical", "taps", "meta"), ("table", "wide"), GEN_UNIQUE),
    "lt_gen_first": (("logical", "taps", "table", "meta"), ("first", "rep"), GEN_FIRST),
    "lt_gen_compact": (
        ("logical", "taps", "table", "rep", "rank", "meta"),
        ("rows", "coords", "out_table", "nbr"),
        GEN_COMPACT,
    ),
    "lt_hash_query": (("table", "coords", "queries", "offs", "meta"), ("nbr",), HASH_QUERY),
    "lt_tap_mask": (("nbr", "meta"), ("mask",), TAP_MASK),
    "lt_invert": (("nbr", "meta"), ("inv",), INVERT),
    "lt_conv": (("x", "w", "bias", "nbr", "order", "meta"), ("y",), CONV),
    "lt_conv_mma": (("x", "w", "bias", "nbr", "order", "meta"), ("y",), CONV_MMA),
    "lt_conv_wgrad": (("x", "dy", "nbr", "meta"), ("dw",), WGRAD),
    "lt_pool": (("x", "nbr", "meta"), ("y",), POOL),
    "lt_pool_share": (("x", "y", "dy", "nbr", "meta"), ("share",), POOL_SHARE),
    "lt_pool_grad": (("x", "y", "g", "count", "inv", "meta"), ("dx",), POOL_GRAD),
}
"""Kernel name -> (input names, output names, body)."""
