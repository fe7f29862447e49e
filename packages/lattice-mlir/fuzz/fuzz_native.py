"""Coverage-guided fuzzing of the native parser and plan import (Atheris + libFuzzer).

Each input is MLIR text.  It goes through ``lattice_mlir``'s in-process
``import_plan`` (the pre-check, MLIR's parser, every verifier, the artifact
rules and the payload builder) and, when the module verifies, through
``RuntimePlan.from_native`` and the type checker.  An input fails the run when

* the process crashes (a signal: libFuzzer reports it and saves the input);
* any exception other than the contract's ``PlanError`` escapes;
* a rejected module comes back without a diagnostic;
* one call takes longer than a second per megabyte (beyond a fixed
  allowance per call for creating the MLIR context and the parser thread),
  in process CPU time and the best of three timings, so a busy machine is
  not mistaken for a stall;
* memory keeps growing: the resident set may not grow by more than
  ``--leak-mb`` after the first thousand executions.

Coverage: Atheris instruments the Python side (``lattice_contract``'s plan
freezer and type checker, ``lattice_mlir``), so inputs that reach new plan
import paths are kept; the C++ module is not compiler-instrumented, so on
the native side the fuzzer relies on libFuzzer's mutators and on the
dictionary, which is generated from the dialect schema (every op, attribute,
enum value and type keyword) plus MLIR's own punctuation.

The seed corpus is read at run time from the valid lit files (stamped with
the built digest) and the upstream corpus (``/work/shared/upstream/corpus``,
or ``$LATTICE_UPSTREAM_CORPUS``); nothing is copied into the repository.
Inputs that once crashed or stalled the parser live in ``regressions/``
beside this file and are replayed by the test suite.

Usage: ``python fuzz_native.py --workdir DIR [--runs N] [--seed S]
[--max-len BYTES] [libFuzzer flags...]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import atheris


def _use_instrumented_native() -> None:
    """Load ``$LATTICE_FUZZ_NATIVE`` (a coverage-instrumented build) as lattice_mlir._native."""
    path = os.environ.get("LATTICE_FUZZ_NATIVE")
    if not path:
        return
    import importlib.util

    spec = importlib.util.spec_from_file_location("lattice_mlir._native", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"$LATTICE_FUZZ_NATIVE={path} is not a loadable extension module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["lattice_mlir._native"] = module


_use_instrumented_native()
with atheris.instrument_imports():
    import lattice_contract.plan
    import lattice_contract.plan.typecheck
    import lattice_mlir

from lattice_contract.dialect import SCHEMA, AttrKind  # noqa: E402 (after the native module is chosen)

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent
REGRESSIONS = HERE / "regressions"
UPSTREAM_CORPUS = Path(os.environ.get("LATTICE_UPSTREAM_CORPUS", "/work/shared/upstream/corpus"))

CALL_ALLOWANCE_S = 0.05
"""Fixed time allowed per call on top of one second per megabyte (a call costs ~0.3 ms)."""

_MLIR_TOKENS = (
    "module", "attributes", "func.func", "func.return", "return", "private", "loc(",
    "callsite(", " at ", "fused[", "->", "(", ")", "{", "}", "[", "]", "<", ">", ":", ",",
    "=", "%", "%0", "%arg0", "^bb0", "@forward", '"', "\\", "\\FF", "#", "!", "?x", "x",
    "array<i64: ", "tensor<", "tensor<?x4xi32>", "tensor<1xi32>", "dense<", "i32", "i64",
    "f16", "bf16", "f32", "f64", "i4", "i8", "true", "false", "unit", "affine_map<",
    "(d0) -> (d0)", "// -----", "{-#", "#-}", "0x", "-", "1e308", "2147483648",
    "9223372036854775808", "0.5",
)  # fmt: skip


def dictionary_tokens() -> list[str]:
    """The dialect's tokens, from the schema, then MLIR's punctuation and keywords."""
    tokens: list[str] = []
    dialect = SCHEMA.name
    for op in SCHEMA.ops.values():
        tokens.append(op.mlir_name)
        tokens.append(f'"{op.mlir_name}"')
        for attr in op.attributes:
            tokens.append(f"{attr.name} = ")
            if attr.spec.kind is AttrKind.triple:
                tokens.append(f"{attr.name} = array<i64: 1, 1, 1>")
        for operand in op.operands:
            tokens.append(operand.name)
    for enum in SCHEMA.enums:
        tokens.append(f"#{dialect}.{enum.__mnemonic__}<")
        for member in enum:
            tokens.append(f"#{dialect}.{enum.__mnemonic__}<{member.value}>")
    for type_def in SCHEMA.types:
        tokens.append(f"!{dialect}.{type_def.mnemonic}<")
        for param in type_def.params:
            tokens.append(f"{param.name} = " if param.keyword else param.name)
            tokens.extend(param.allowed)
    for name, _ in SCHEMA.packing_fields:
        tokens.append(f"{name} = ")
    for key in ("ir_version", "schema_digest", "input_names", "input_roles", "output_names"):
        tokens.append(f"{dialect}.{key}")
    tokens.extend(("lattice.output_roles", "lattice.weight_file", '"weights.safetensors"'))
    tokens.append(f'"{lattice_mlir.SCHEMA_DIGEST}"')
    tokens.extend(_MLIR_TOKENS)
    return sorted(set(tokens))


def write_dictionary(path: Path) -> Path:
    """The tokens in libFuzzer's dictionary format (one quoted, escaped entry a line)."""

    def quoted(token: str) -> str:
        data = token.encode("utf-8")
        body = "".join(
            chr(b) if 0x20 <= b < 0x7F and b not in (0x22, 0x5C) else f"\\x{b:02x}" for b in data
        )
        return f'"{body}"'

    path.write_text("".join(quoted(t) + "\n" for t in dictionary_tokens()), encoding="utf-8")
    return path


def seed_texts() -> Iterator[tuple[str, str]]:
    """``(name, text)`` of every seed: the valid lit files, the upstream corpus."""
    for path in sorted((PACKAGE / "test" / "valid").glob("*.mlir")):
        body = "".join(
            line
            for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
            if not line.startswith("//")
        )
        yield f"lit-{path.stem}", body.replace("@SCHEMA_DIGEST@", lattice_mlir.SCHEMA_DIGEST)
    if not UPSTREAM_CORPUS.is_dir():
        raise SystemExit(f"the upstream corpus is missing at {UPSTREAM_CORPUS}")
    for path in sorted(UPSTREAM_CORPUS.rglob("*.mlir")):
        relative = path.relative_to(UPSTREAM_CORPUS).with_suffix("")
        text = path.read_text(encoding="utf-8")
        yield "upstream-" + "-".join(relative.parts), text
        # The same module under this build's digest, so it reaches the artifact rules.
        yield "upstream-stamped-" + "-".join(relative.parts), _restamp(text)


def _restamp(text: str) -> str:
    import re

    return re.sub(
        r'lattice\.schema_digest = "[0-9a-f]{64}"',
        f'lattice.schema_digest = "{lattice_mlir.SCHEMA_DIGEST}"',
        text,
    )


class FuzzFailure(Exception):
    """An input broke one of the fuzzer's rules (libFuzzer saves it as a crash)."""


def _budget(size: int) -> float:
    return CALL_ALLOWANCE_S + size / 1e6


def _timed_import(text: str) -> tuple[tuple[bool, str, object], float]:
    # CPU time of the whole process (the parse runs on a native worker
    # thread): other processes competing for the cores do not count.
    start = time.process_time()
    result = lattice_mlir._native.check(text, True)
    return result, time.process_time() - start


def check_one(data: bytes) -> None:
    """The fuzz target: one input through import, freezing and type checking."""
    text = data.decode("utf-8", errors="replace")
    (valid, diagnostics, payload), seconds = _timed_import(text)
    if seconds > _budget(len(data)):
        best = min(seconds, *(_timed_import(text)[1] for _ in range(2)))
        if best > _budget(len(data)):
            raise FuzzFailure(
                f"a {len(data)}-byte input took {best:.3f} s, more than one second per "
                f"megabyte plus {CALL_ALLOWANCE_S} s"
            )
    if not valid:
        if not diagnostics.strip():
            raise FuzzFailure("a rejected module came back without a diagnostic")
        return
    if not isinstance(payload, dict):
        raise FuzzFailure(f"a verified module gave a {type(payload).__name__} payload")
    freeze(payload)
    # The same payload, corrupted by choices drawn from the input's bytes, so
    # the plan freezer's rejection paths are coverage-guided too.
    provider = atheris.FuzzedDataProvider(data)
    for _ in range(provider.ConsumeIntInRange(1, 4)):
        freeze(mutate_payload(payload, provider))


def freeze(payload: object) -> None:
    """Freeze and type-check a payload; the contract's PlanError is the only allowed error."""
    try:
        plan = lattice_contract.plan.RuntimePlan.from_native(payload)  # type: ignore[arg-type]
        lattice_contract.plan.typecheck.typecheck_plan(plan)
    except lattice_contract.plan.PlanError:
        pass  # a verdict, not a failure


def _hostile_value(provider: atheris.FuzzedDataProvider, payload: object) -> object:
    choice = provider.ConsumeIntInRange(0, 11)
    if choice == 0:
        return None
    if choice == 1:
        return provider.ConsumeBool()
    if choice == 2:
        return provider.ConsumeInt(provider.ConsumeIntInRange(1, 600))  # beyond int64
    if choice == 3:
        return provider.ConsumeFloat()
    if choice == 4:
        return provider.ConsumeUnicodeNoSurrogates(provider.ConsumeIntInRange(0, 16))
    if choice == 5:
        deep: object = []
        for _ in range(provider.ConsumeIntInRange(1, 5000)):
            deep = [deep]
        return deep
    if choice == 6:
        return {provider.ConsumeUnicodeNoSurrogates(4): 1}
    if choice == 7:
        return [provider.ConsumeInt(8) for _ in range(provider.ConsumeIntInRange(0, 4))]
    if choice == 8:
        return 10 ** provider.ConsumeIntInRange(18, 6000)  # more digits than str() allows
    if choice == 9:
        return "v0"  # a label that exists: duplicates and cycles
    if choice == 10:
        return {}
    return _pick(payload, provider)[0]  # another part of the payload


def _pick(
    node: object, provider: atheris.FuzzedDataProvider
) -> tuple[object, list[tuple[object, object]]]:
    """A node of the payload tree and the (container, key) path that reaches it."""
    path: list[tuple[object, object]] = []
    while provider.ConsumeIntInRange(0, 3) and isinstance(node, (dict, list)) and node:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        key = keys[provider.ConsumeIntInRange(0, len(keys) - 1)]
        path.append((node, key))
        node = node[key]
    return node, path


def mutate_payload(payload: dict[str, object], provider: atheris.FuzzedDataProvider) -> object:
    """A deep copy of ``payload`` with one value replaced, deleted or added."""
    import copy

    root = copy.deepcopy(payload)
    _, path = _pick(root, provider)
    if not path:
        return _hostile_value(provider, root) if provider.ConsumeBool() else root
    container, key = path[-1]
    action = provider.ConsumeIntInRange(0, 2)
    if action == 0:
        container[key] = _hostile_value(provider, root)  # type: ignore[index]
    elif action == 1:
        del container[key]  # type: ignore[attr-defined]
    elif isinstance(container, dict):
        container[provider.ConsumeUnicodeNoSurrogates(6)] = _hostile_value(provider, root)
    else:
        container.insert(key, container[key])  # type: ignore[attr-defined, index]
    return root


def _rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class _LeakWatch:
    """Fails the run when the resident set keeps growing after a warm-up."""

    def __init__(self, limit_mb: float, warmup: int = 1000) -> None:
        self.limit_mb, self.warmup = limit_mb, warmup
        self.count = 0
        self.baseline: float | None = None

    def __call__(self, data: bytes) -> None:
        check_one(data)
        self.count += 1
        if self.count == self.warmup:
            self.baseline = _rss_mb()
        elif self.baseline is not None and self.count % 1000 == 0:
            grown = _rss_mb() - self.baseline
            if grown > self.limit_mb:
                raise FuzzFailure(
                    f"resident memory grew by {grown:.0f} MB over {self.count - self.warmup} "
                    f"executions (limit {self.limit_mb} MB): a leak"
                )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-len", type=int, default=16_384)
    parser.add_argument("--leak-mb", type=float, default=64.0)
    ours, libfuzzer = parser.parse_known_args(argv[1:])
    work: Path = ours.workdir
    seeds, found, crashes = work / "seeds", work / "corpus", work / "crashes"
    for folder in (seeds, found, crashes):
        folder.mkdir(parents=True, exist_ok=True)
    for name, text in seed_texts():
        (seeds / f"{name}.mlir").write_text(text, encoding="utf-8")
    for path in sorted(REGRESSIONS.glob("*")):
        (seeds / f"regression-{path.name}").write_bytes(path.read_bytes())
    dictionary = write_dictionary(work / "lattice.dict")
    args = [
        argv[0],
        f"-runs={ours.runs}",
        f"-seed={ours.seed}",
        f"-max_len={ours.max_len}",
        f"-dict={dictionary}",
        f"-artifact_prefix={crashes}/",
        "-timeout=30",
        "-rss_limit_mb=4096",
        "-print_final_stats=1",
        *libfuzzer,
        str(found),
        str(seeds),
    ]
    atheris.Setup(args, _LeakWatch(ours.leak_mb))
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
