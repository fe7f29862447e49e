"""The native parser's limits: no text crashes or stalls it.

Each hostile input class that once killed the process (a stack overflow in
MLIR's recursive-descent parser, a float literal converted on the stack) or
stalled it (number literals converted in quadratic time) is now refused by
the lexical pre-check, with a diagnostic that names the limit and points at
the line and column; text exactly at each limit still parses.  Every input
runs in a child interpreter, so a regression is a reported signal, not a
dead pytest, and each call is timed against the bar of one second per
megabyte.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

# The limits (lib/LatticePrecheck.h).
MAX_BYTES = 16 << 20
MAX_NESTING = 256
MAX_NUMBER = 128
MAX_IDENTIFIER = 256
MAX_STRING = 64 << 10

OptRunner = Callable[..., "subprocess.CompletedProcess[str]"]

_CHILD = """
import json, sys, time
import lattice_mlir
texts = json.load(open(sys.argv[1], encoding="utf-8"))
out = []
for i, text in enumerate(texts):
    open(sys.argv[3], "w").write(str(i))
    start = time.perf_counter()
    status = lattice_mlir.verify(text)
    seconds = time.perf_counter() - start
    out.append([status.valid, status.diagnostics, seconds])
json.dump(out, open(sys.argv[2], "w", encoding="utf-8"))
"""


def verify_in_child(tmp_path: Path, texts: list[str]) -> list[tuple[bool, str, float]]:
    """``(valid, diagnostics, seconds)`` per text, verified in a fresh interpreter."""
    source, result, progress = tmp_path / "in.json", tmp_path / "out.json", tmp_path / "at"
    source.write_text(json.dumps(texts), encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-c", _CHILD, str(source), str(result), str(progress)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if run.returncode != 0:
        at = progress.read_text() if progress.exists() else "?"
        raise AssertionError(
            f"verify died with exit code {run.returncode} on input #{at}: {run.stderr[-1500:]}"
        )
    return [(bool(v), str(d), float(s)) for v, d, s in json.loads(result.read_text())]


def within_time_bar(text: str, seconds: float) -> bool:
    """One second per megabyte, with a floor for the fixed cost of one call."""
    return seconds <= max(0.5, len(text.encode("utf-8")) / 1e6)


def _module_attr(value: str) -> str:
    return "module attributes {x.a = " + value + "} {}\n"


def _generic_regions(depth: int) -> str:
    return '"builtin.module"() ({\n' * depth + "}) : () -> ()\n" * depth


def _alias_chain(length: int) -> str:
    lines = ["!t0 = i32"] + [f"!t{i} = tuple<!t{i - 1}>" for i in range(1, length)]
    return "\n".join(lines) + f'\nmodule attributes {{x.t = "{length}"}} {{}}\n'


def _alias_doubling(length: int) -> str:
    lines = ["#a0 = [1]"] + [f"#a{i} = [#a{i - 1}, #a{i - 1}]" for i in range(1, length)]
    return "\n".join(lines) + f"\nmodule attributes {{x.a = #a{length - 1}}} {{}}\n"


_GE = "affine_set<(d0) : (" + ", ".join(["d0 >= 0"] * 250) + ")>"
_GE_TRICK = ("[" * 200 + _GE + ", ") * 40 + "1" + "]" * 8000
_STRAY_TRICK = ("[" * 200 + "#foo<" + ")" * 250 + ">, ") * 40 + "1" + "]" * 8000
_SPLIT_TRICK = _module_attr("[" * 200 + "\n// -----\n" + "[" * 9000 + "]" * 9200)

# (name, text, limit words, line:col of the diagnostic)
HOSTILE: list[tuple[str, str, str, str | None]] = [
    ("array 8000 deep", _module_attr("[" * 8000 + "]" * 8000), "nesting", "1:281"),
    ("dictionary 10000 deep", _module_attr("{a = " * 10000 + "1" + "}" * 10000), "nesting", None),
    ("region 10000 deep", "module {" * 10000 + "}" * 10000, "nesting", "1:2056"),
    ("generic region 10000 deep", _generic_regions(10000), "nesting", "129:17"),
    (
        "tensor type 100000 deep",
        "func.func private @f() -> " + "tensor<" * 100000 + "f32" + ">" * 100000 + "\n",
        "nesting",
        None,
    ),
    (
        "parenthesised type 100000 deep",
        "func.func private @f() -> " + "(" * 100000 + "f32" + ")" * 100000 + "\n",
        "nesting",
        None,
    ),
    (
        "callsite location 100000 deep",
        "module {} loc(" + "callsite(" * 100000 + '"a"' + ' at "b")' * 100000 + ")\n",
        "nesting",
        None,
    ),
    (
        "affine negation 100000 deep",
        _module_attr("affine_map<(d0) -> (" + "- " * 100000 + "d0)>"),
        "run of minus signs",
        None,
    ),
    ("alias chain 20000 deep", _alias_chain(20000), "nesting", "258:15"),
    # Closers that do not close what is open must not lower the count: the
    # '>' of '>=' in an affine constraint, a ')' inside a dialect body.
    ("'>=' does not close brackets", _module_attr(_GE_TRICK), "nesting", "1:2552"),
    ("stray closers", _module_attr(_STRAY_TRICK), "nesting", "1:539"),
    # In one module a split marker is a comment: it does not reset the count.
    ("split marker in one module", _SPLIT_TRICK, "nesting", "3:56"),
    ("aliases doubling in size", _alias_doubling(64), "aliases expanded", None),
    ("float literal of 40000 digits", _module_attr("1." + "1" * 40000), "number literal", "1:26"),
    ("integer literal of 10000 digits", _module_attr("1" * 10000), "number literal", "1:26"),
    ("integer literal of 30000 digits", _module_attr("1" * 30000), "number literal", "1:26"),
    (
        "hex literal of 5000 digits",
        _module_attr("0x" + "f" * 5000 + " : i64"),
        "number literal",
        "1:26",
    ),
    (
        "shape of 100000 dimensions",
        _module_attr("tensor<" + "1x" * 100000 + "f32>"),
        "identifier",
        "1:34",
    ),
    ("string of 1 MiB", _module_attr('"' + "s" * (1 << 20) + '"'), "string literal", "1:26"),
    (
        "text over 16 MiB",
        "module {}\n// " + "c" * MAX_BYTES + "\n",
        "16 MiB",
        None,
    ),
]


@pytest.mark.parametrize("case", HOSTILE, ids=[c[0] for c in HOSTILE])
def test_hostile_text_is_refused_at_its_position(
    tmp_path: Path, case: tuple[str, str, str, str | None]
) -> None:
    _name, text, words, position = case
    [(valid, diagnostics, seconds)] = verify_in_child(tmp_path, [text])
    assert not valid
    first = diagnostics.splitlines()[0]
    assert "parser's limit" in first and words in first, first
    assert re.match(r"graph\.mlir:\d+:\d+: error: ", first), first
    if position is not None:
        assert first.startswith(f"graph.mlir:{position}: error: "), first
    assert within_time_bar(text, seconds), (seconds, len(text))


def _artifact(valid_modules: dict[str, str], attribute: str) -> str:
    """The sparse_make corpus module with one more (discardable) module attribute."""
    text = valid_modules["sparse_make"]
    return text.replace("module attributes {", "module attributes {" + attribute + ", ", 1)


def test_text_at_each_limit_still_verifies(tmp_path: Path, valid_modules: dict[str, str]) -> None:
    # The module's attribute dictionary is one level, so 255 more reach the limit.
    deep = MAX_NESTING - 1
    texts = {
        "nesting": _artifact(valid_modules, "x.deep = " + "[" * deep + "]" * deep),
        "number": _artifact(valid_modules, "x.n = 0." + "1" * (MAX_NUMBER - 2) + " : f64"),
        "identifier": _artifact(valid_modules, "x." + "i" * (MAX_IDENTIFIER - 2) + " = 1"),
        "string": _artifact(valid_modules, 'x.s = "' + "s" * MAX_STRING + '"'),
        "aliases": "!a0 = i32\n"
        + "".join(f"!a{i} = tuple<!a{i - 1}>\n" for i in range(1, deep))
        + _artifact(valid_modules, f"x.t = !a{deep - 1}"),
    }
    base = _artifact(valid_modules, "x.pad = 0")
    texts["size"] = base + "//" + "p" * (MAX_BYTES - len(base.encode()) - 3) + "\n"
    assert len(texts["size"].encode()) == MAX_BYTES
    over = {
        "nesting": _artifact(valid_modules, "x.deep = " + "[" * (deep + 1) + "]" * (deep + 1)),
        "number": _artifact(valid_modules, "x.n = 0." + "1" * (MAX_NUMBER - 1) + " : f64"),
        "identifier": _artifact(valid_modules, "x." + "i" * (MAX_IDENTIFIER - 1) + " = 1"),
        "string": _artifact(valid_modules, 'x.s = "' + "s" * (MAX_STRING + 1) + '"'),
        "size": texts["size"] + "\n",
    }
    results = verify_in_child(tmp_path, list(texts.values()) + list(over.values()))
    for name, text, (valid, diagnostics, seconds) in zip(
        list(texts) + [f"over {n}" for n in over],
        list(texts.values()) + list(over.values()),
        results,
        strict=True,
    ):
        at_limit = not name.startswith("over ")
        assert valid == at_limit, (name, diagnostics[:300])
        assert at_limit or "parser's limit" in diagnostics, (name, diagnostics[:300])
        assert within_time_bar(text, seconds), (name, seconds)


def test_deep_text_is_safe_on_a_small_caller_stack(
    tmp_path: Path, valid_modules: dict[str, str]
) -> None:
    """The parser runs on its own large-stack thread, whatever the caller's stack."""
    deep = _artifact(valid_modules, "x.deep = " + "[" * 255 + "]" * 255)
    regions = _generic_regions(MAX_NESTING // 2)
    script = (
        "import sys, threading, lattice_mlir\n"
        "texts = [sys.stdin.read().split('\\x00')][0]\n"
        "threading.stack_size(128 * 1024)\n"
        "out = []\n"
        "t = threading.Thread(target=lambda: out.extend(lattice_mlir.verify(x) for x in texts))\n"
        "t.start(); t.join()\n"
        "print([s.valid for s in out])\n"
        "print(out[1].diagnostics.splitlines()[0])\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        input=deep + "\x00" + regions,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-1500:]
    lines = run.stdout.splitlines()
    assert lines[0] == "[True, False]"
    assert "parser's limit" not in lines[1]  # 256 levels parse; the artifact rules reject them


def test_lattice_opt_reports_the_limits_with_file_positions(
    tmp_path: Path, run_opt: OptRunner
) -> None:
    for name, text, words, position in HOSTILE[:3] + HOSTILE[10:11]:
        path = tmp_path / "hostile.mlir"
        path.write_text(text, encoding="utf-8")
        run = run_opt(str(path))
        assert run.returncode == 1, (name, run.returncode, run.stderr[-500:])
        first = run.stderr.splitlines()[0]
        assert words in first and "parser's limit" in first, first
        if position is not None:
            assert first.startswith(f"{path}:{position}: error: "), first
    # At the limit lattice-opt parses (on its large-stack thread) and prints.
    path = tmp_path / "deep.mlir"
    path.write_text("module {\n" * MAX_NESTING + "}\n" * MAX_NESTING, encoding="utf-8")
    run = run_opt(str(path))
    assert run.returncode == 0, run.stderr[-500:]
    assert run.stdout.count("module {") == MAX_NESTING


# --- strings that are not UTF-8, strides outside int32 --------------------------


def _escaped(valid_modules: dict[str, str], field: str) -> str:
    text = valid_modules["conv3d"]
    if field == "abi name with NUL":
        return text.replace('lattice.output_names = ["y"]', 'lattice.output_names = ["y\\00"]')
    if field == "storage key with newline":
        return text.replace('storage_key = "conv.weight"', 'storage_key = "conv\\0Aweight"')
    if field == "abi name":
        return text.replace(
            'lattice.input_names = ["x_coords"', 'lattice.input_names = ["x\\FF_coords"'
        )
    return re.sub(r'storage_key = "([^"]*)"', r'storage_key = "\1\\C3\\28"', text, count=1)


@pytest.mark.parametrize(
    "field", ["abi name", "storage key", "abi name with NUL", "storage key with newline"]
)
def test_escapes_that_are_not_utf8_get_a_diagnostic(
    tmp_path: Path, valid_modules: dict[str, str], run_opt: OptRunner, field: str
) -> None:
    words = "control character" if " with " in field else "not valid UTF-8"
    text = _escaped(valid_modules, field)
    assert text != valid_modules["conv3d"]
    script = (
        "import sys, lattice_mlir\n"
        "text = sys.stdin.read()\n"
        "status = lattice_mlir.verify(text)\n"
        "assert not status.valid\n"
        "try:\n"
        "    lattice_mlir.import_plan(text)\n"
        "except lattice_mlir.LatticeMLIRError as error:\n"
        "    print(str(error).splitlines()[0])\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], input=text, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr[-1500:]
    assert words in run.stdout, run.stdout
    path = tmp_path / "escaped.mlir"
    path.write_text(text, encoding="utf-8")
    opt = run_opt("--lattice-verify-artifact", str(path))
    assert opt.returncode == 1 and words in opt.stderr, opt.stderr[-500:]


@pytest.mark.parametrize("stride", [2**31, 2**32, 2**62])
def test_stride_beyond_int32_is_rejected(valid_modules: dict[str, str], stride: int) -> None:
    import lattice_mlir

    text = valid_modules["sparse_make"].replace(
        "stride = array<i64: 2, 4, 2>", f"stride = array<i64: {stride}, 1, 1>"
    )
    assert text != valid_modules["sparse_make"]
    status = lattice_mlir.verify(text)
    assert not status.valid
    assert "has a component above 2147483647; coordinates are int32" in status.diagnostics
    edge = text.replace(f"{stride}, 1, 1", f"{2**31 - 1}, 1, 1")
    assert lattice_mlir.verify(edge).valid


def test_split_marker_resets_the_count_only_for_split_input(
    tmp_path: Path, run_opt: OptRunner
) -> None:
    """lattice-opt --split-input-file parses each chunk alone, so each has its own count."""
    chunk = _module_attr("[" * 200 + "]" * 200)
    text = _module_attr("[" * 200)[:-4] + "\n// -----\n" + chunk  # an unclosed first chunk
    path = tmp_path / "split.mlir"
    path.write_text(text, encoding="utf-8")
    split = run_opt("--split-input-file", str(path))
    assert split.returncode == 1 and "parser's limit" not in split.stderr, split.stderr[-800:]
    whole = run_opt(str(path))
    assert whole.returncode == 1 and "nesting deeper than the parser's limit" in whole.stderr
