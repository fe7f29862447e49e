"""Native verification + plan import of a 200-op lattice graph (the budget: at most 5 ms).

Builds a MinkUNet-like graph of about 200 ops with ``MLIRModuleBuilder`` (the
producer every exporter uses: encoder/decoder convolutions with weights and
biases, feature-only updates through sparse.decompose / with_features, skip
concatenations, a linear head), then times, in one process, each stage a
runtime goes through before it touches a weight:

* ``verify``: ``lattice_mlir.verify`` (parse, every op verifier, the artifact
  rules) -- the in-process validation path, shown for reference;
* ``import_plan``: ``lattice_mlir.import_plan`` (the same verification plus
  the plan payload as Python dicts; loading does not call ``verify`` first);
* ``verify_and_import``: ``lattice_mlir.verify_and_import``, the verdict and
  the payload from that one parse (what validating an artifact calls);
* ``from_native``: ``RuntimePlan.from_native`` on that payload (every schema,
  SSA and ABI rule, attributes frozen);
* ``typecheck``: ``typecheck_plan`` on the frozen plan;
* ``total``: ``lattice_contract.plan.verify.graph_status_and_plan`` (one native
  check, then ``from_native``) and ``typecheck_plan`` back to back on the
  same text -- verify + import, the figure the 5 ms budget applies to;
* ``two calls``: ``verify`` and then the import, freeze and type check, the
  way an artifact's validation went before it had the one call (for
  comparison);
* ``lattice-opt``: validation through the ``lattice-opt`` executable in a
  subprocess, the peer path of installs without the in-process module.

With ``mlx_lattice`` and/or ``torch_lattice`` installed it also times
``compile_lattice_artifact`` end to end on a weightless graph of the same size
(decompose / activation / softmax / with_features / sparse.binary blocks):
import, freeze, type check, lowering binding and scheduling, so what the
runtime adds on top of ``total`` is visible.

A ``verify`` of a one-op graph shows the fixed cost of a native call: the
calls run on long-lived parser threads that reuse a ready MLIR context
(``lib/LatticeParserPool.cpp``), so no context is built and no thread is
started per call.

Each path reports the median and the minimum wall time of ``--repeat`` runs
after warm-up and the process's CPU time per run, averaged over the runs
(every thread counts, the parser threads too; on a shared, loaded machine
the minimum and the CPU time show the cost of the work, the median includes
waiting for a core); the last column is the median's ratio to the 5 ms
budget (below 1: within budget).

With ``--locations`` every op carries its block's module path as an MLIR name
location, as exported graphs do, and the payload carries it as ``location``.

Run: ``.venv/bin/python benchmarks/bench_native_import.py [--ops 200] [--repeat 200]
[--locations]``
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import lattice_mlir
from lattice_contract.builder import MLIRModuleBuilder, Value
from lattice_contract.plan import RuntimePlan, graph_status_and_plan, typecheck_plan

BUDGET_S = 5e-3


def conv_weight(b: MLIRModuleBuilder, key: str, c_out: int, k: int, c_in: int) -> Value:
    weight: Value = b.weight(
        storage_key=f"{key}.weight",
        layout="conv3d_o_xyz_i",
        dtype="f16",
        shape=(c_out, k, k, k, c_in),
    )
    return weight


def bias(b: MLIRModuleBuilder, key: str, c: int) -> Value:
    weight: Value = b.weight(storage_key=f"{key}.bias", layout="bias_c", dtype="f16", shape=(c,))
    return weight


def block(
    b: MLIRModuleBuilder, x: Value, key: str, c_in: int, c_out: int, located: bool = False
) -> Value:
    """subm conv + bias, then relu on the features, support kept explicitly (5 ops)."""
    b.set_location(key if located else None)  # an exporter writes the module path
    y = b.subm_conv3d(
        input=x, weight=conv_weight(b, key, c_out, 3, c_in), bias=bias(b, key, c_out), kernel_size=3
    )
    _, feats, _ = b.sparse_decompose(input=y)
    out: Value = b.sparse_with_features(input=y, features=b.activation(input=feats, kind="relu"))
    return out


def build_graph(target_ops: int, located: bool = False) -> tuple[str, int]:
    """A UNet-like graph with about ``target_ops`` ops; returns (text, op count).

    ``located``: every block's ops carry its module path as their location
    (``loc("enc0a")``), as an exported graph's do.
    """
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f16")
    h = block(b, x, "stem", 4, 32, located)
    skips: list[tuple[Value, int]] = []
    c = 32
    level = 0
    # Encoder levels then decoder levels, repeated until the op budget is used.
    while len(b.operations) < target_ops - 40:
        skips.append((h, c))
        down = conv_weight(b, f"down{level}", c * 2 if c < 256 else c, 2, c)
        c_next = c * 2 if c < 256 else c
        h = b.conv3d(input=h, weight=down, kernel_size=2, stride=2)
        h = block(b, h, f"enc{level}a", c_next, c_next, located)
        h = block(b, h, f"enc{level}b", c_next, c_next, located)
        c = c_next
        level += 1
        if level % 4 == 0:
            while skips:
                skip, c_skip = skips.pop()
                up = conv_weight(b, f"up{level}_{len(skips)}", c_skip, 2, c)
                h = b.target_conv_transpose3d(
                    input=h, target=skip, weight=up, kernel_size=2, stride=2
                )
                h = b.sparse_cat(lhs=h, rhs=skip, join="inner")
                h = block(b, h, f"dec{level}_{len(skips)}", 2 * c_skip, c_skip, located)
                c = c_skip
    _, feats, _ = b.sparse_decompose(input=h)
    head = b.weight(storage_key="head.weight", layout="linear_o_i", dtype="f16", shape=(20, c))
    logits = b.linear(input=feats, weight=head, bias=bias(b, "head", 20))
    b.add_output("y", h)
    b.add_output("logits", logits)
    return b.build(), len(b.operations)


def build_weightless_graph(target_ops: int) -> tuple[str, int]:
    """About ``target_ops`` ops and no weights, so a runtime compiles it without a bundle."""
    b = MLIRModuleBuilder()
    h = b.add_sparse_input("x", channels=16, dtype="f32")
    while len(b.operations) < target_ops - 5:
        _, feats, _ = b.sparse_decompose(input=h)
        feats = b.softmax(input=b.activation(input=feats, kind="gelu", approximate="tanh"))
        updated = b.sparse_with_features(input=h, features=feats)
        h = b.sparse_binary(lhs=updated, rhs=h, op="add", join="inner")
    b.add_output("y", h)
    return b.build(), len(b.operations)


Timing = tuple[float, float, float]


def end_to_end_rows(target_ops: int, repeat: int) -> tuple[int, list[tuple[str, Timing]]]:
    """Op count of the weightless graph and ``compile_lattice_artifact`` on each runtime."""
    text, count = build_weightless_graph(target_ops)
    rows: list[tuple[str, Timing]] = []
    try:
        from mlx_lattice.artifact import LatticeArtifact as MLXArtifact
        from mlx_lattice.artifact import compile_lattice_artifact as mlx_compile

        mlx_artifact = MLXArtifact(text, {})
        rows.append(("mlx compile", timings(lambda: mlx_compile(mlx_artifact), repeat)))
    except ImportError:
        print("mlx_lattice is not installed: no MLX end-to-end row", file=sys.stderr)
    try:
        from torch_lattice.artifact import LatticeArtifact as TorchArtifact
        from torch_lattice.artifact import compile_lattice_artifact as torch_compile

        torch_artifact = TorchArtifact(text, {})
        rows.append(("torch compile", timings(lambda: torch_compile(torch_artifact), repeat)))
    except ImportError:
        print("torch_lattice is not installed: no torch end-to-end row", file=sys.stderr)
    return count, rows


def timings(fn: Callable[[], object], repeat: int) -> Timing:
    """(median wall, minimum wall, mean CPU) seconds per call.

    The CPU time is the process's (every thread, the native parser threads
    too) over all the runs, divided by their number: time spent waiting for
    a core does not count in it.  It is not taken per run because the kernel
    adds a thread's CPU time to the process's only when that thread stops
    running, and a parser thread may still be going to sleep when its
    caller has the result.
    """
    for _ in range(3):
        fn()
    samples = []
    cpu_start = time.process_time()
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    cpu = (time.process_time() - cpu_start) / repeat
    return statistics.median(samples), min(samples), cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=200, help="approximate op count of the graph")
    parser.add_argument("--repeat", type=int, default=200, help="timed runs per path")
    parser.add_argument(
        "--locations", action="store_true", help="give each block's ops its module path as loc"
    )
    args = parser.parse_args()

    text, count = build_graph(args.ops, args.locations)
    status = lattice_mlir.verify(text)
    if not status.valid:
        print(status.diagnostics, file=sys.stderr)
        return 1
    plan = lattice_mlir.import_plan(text)
    assert len(plan["ops"]) == count

    frozen = RuntimePlan.from_native(plan)

    def one_call() -> object:
        status, checked = graph_status_and_plan(text)
        assert status.valid and checked is not None
        return typecheck_plan(checked)

    def two_calls() -> object:
        assert lattice_mlir.verify(text).valid
        return typecheck_plan(RuntimePlan.from_native(lattice_mlir.import_plan(text)))

    small, small_count = build_weightless_graph(1)
    assert lattice_mlir.verify(small).valid
    rows = [
        (f"verify {small_count} op", timings(lambda: lattice_mlir.verify(small), args.repeat)),
        ("verify", timings(lambda: lattice_mlir.verify(text), args.repeat)),
        ("import_plan", timings(lambda: lattice_mlir.import_plan(text), args.repeat)),
        ("verify_and_import", timings(lambda: lattice_mlir.verify_and_import(text), args.repeat)),
        ("from_native", timings(lambda: RuntimePlan.from_native(plan), args.repeat)),
        ("typecheck", timings(lambda: typecheck_plan(frozen), args.repeat)),
        ("total", timings(one_call, args.repeat)),
        ("two calls", timings(two_calls, args.repeat)),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        graph = Path(tmp) / "graph.mlir"
        graph.write_text(text, encoding="utf-8")
        exe = str(lattice_mlir.lattice_opt_path())
        cmd = [exe, "--lattice-verify-artifact", str(graph), "-o", str(Path(tmp) / "out.mlir")]
        rows.append(
            (
                "lattice-opt",
                timings(
                    lambda: subprocess.run(cmd, check=True, capture_output=True),
                    max(10, args.repeat // 10),
                ),
            )
        )

    weightless_ops, weightless = end_to_end_rows(args.ops, args.repeat)

    located = sum("location" in op for op in plan["ops"])
    print(f"graph: {count} ops ({located} located), {len(text) / 1024:.1f} KiB of MLIR text")
    print(f"{'path':<18}{'median ms':>11}{'min ms':>9}{'cpu ms':>9}{'x budget':>10}")
    for name, (median, best, cpu) in rows:
        cpu_text = f"{cpu * 1e3:>9.3f}" if name != "lattice-opt" else f"{'(child)':>9}"
        print(
            f"{name:<18}{median * 1e3:>11.3f}{best * 1e3:>9.3f}{cpu_text}{median / BUDGET_S:>10.2f}"
        )
    by_name = {name: timing for name, timing in rows}
    ratio = by_name["lattice-opt"][0] / by_name["import_plan"][0]
    print(f"lattice-opt subprocess / in-process import_plan (median): {ratio:.1f}x")
    if weightless:
        print(f"weightless graph of {weightless_ops} ops, compiled end to end (no weights):")
        for name, (median, best, cpu) in weightless:
            print(
                f"{name:<18}{median * 1e3:>11.3f}{best * 1e3:>9.3f}{cpu * 1e3:>9.3f}"
                f"{median / BUDGET_S:>10.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
