#!/usr/bin/env bash
# The long fuzz run with native coverage: builds lattice_mlir._native with
# clang's sanitizer coverage (LATTICE_FUZZ_COVERAGE=ON) into a build folder of
# its own, then runs fuzz_native.py on it with libFuzzer's runtime preloaded
# (Atheris's ubsan_with_fuzzer.so), so libFuzzer sees the C++ paths each input
# reaches.  The installed module is not touched.
#
#   packages/lattice-mlir/fuzz/run_instrumented.sh WORKDIR [fuzz_native.py options]
#
# Needs clang-19 (Debian: apt-get install clang-19) and nanobind in the venv.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
work="${1:?usage: run_instrumented.sh WORKDIR [fuzz_native.py options]}"
shift
build="$work/native-build"
mkdir -p "$build"
cmake -S "$here/.." -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER=clang++-19 -DLATTICE_FUZZ_COVERAGE=ON \
  -DPython_EXECUTABLE="$python" -DCMAKE_PREFIX_PATH="$(llvm-config-19 --prefix)" >/dev/null
cmake --build "$build" --target _native
module="$(ls "$build"/_native.cpython-*.so)"
fuzzer_runtime="$("$python" -c 'import atheris; print(atheris.path())')/ubsan_with_fuzzer.so"
LD_PRELOAD="$fuzzer_runtime" LATTICE_FUZZ_NATIVE="$module" \
  exec "$python" "$here/fuzz_native.py" --workdir "$work" "$@"
