"""No text crashes the native parser: mutated valid modules, in process and via lattice-opt.

Every valid corpus module (and a few in MLIR's generic op form) is mutated
(byte flips, truncations, token swaps, replacements, deletions and
duplications, extreme numbers, spliced lines) with a fixed seed, so a
failure reproduces exactly.  Each mutant must either verify or produce a
diagnostic; the process must never die.  The in-process
run happens in a child interpreter (a crash there is a signal exit code, not
a dead pytest), which records each mutant before parsing it so that the
crashing text is reported.  lattice-opt gets the same mutants in batches
(``--split-input-file``) and must agree with the in-process verdicts.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

SEED = 20240611
IN_PROCESS_MUTANTS = 4000
LATTICE_OPT_MUTANTS = 2000
BATCH = 50

_TOKEN = re.compile(r"\s+|[A-Za-z_][\w.$]*|[%@#!^][\w.$#-]*|-?\d+(?:\.\d+)?(?:e[+-]?\d+)?|.", re.S)
_EXTREMES = ["0", "-1", "1", "2147483648", "9223372036854775807", "99999999999999999999", "-0"]


def mutants(corpus: list[str], seed: int, count: int) -> Iterator[str]:
    """``count`` deterministic mutants of the corpus texts."""
    rng = random.Random(seed)
    tokens = [_TOKEN.findall(text) for text in corpus]
    vocabulary = sorted({tok for toks in tokens for tok in toks if not tok.isspace()})
    for _ in range(count):
        index = rng.randrange(len(corpus))
        text, toks = corpus[index], list(tokens[index])
        kind = rng.randrange(9)
        if kind == 0:  # byte flips
            data = bytearray(text.encode("utf-8"))
            for _ in range(rng.randint(1, 6)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            yield data.decode("utf-8", errors="replace")
            continue
        if kind == 1:  # truncation
            yield text[: rng.randrange(len(text))]
            continue
        if kind == 7:  # line deletion, duplication or splice from another module
            lines = text.splitlines(keepends=True)
            other = corpus[rng.randrange(len(corpus))].splitlines(keepends=True)
            at = rng.randrange(len(lines))
            choice = rng.randrange(3)
            if choice == 0:
                del lines[at]
            elif choice == 1:
                lines.insert(at, lines[at])
            else:
                lines.insert(at, other[rng.randrange(len(other))])
            yield "".join(lines)
            continue
        for _ in range(rng.randint(1, 3)):
            a = rng.randrange(len(toks))
            if kind == 2:  # token swap
                b = rng.randrange(len(toks))
                toks[a], toks[b] = toks[b], toks[a]
            elif kind == 3:  # token replacement from the corpus vocabulary
                toks[a] = rng.choice(vocabulary)
            elif kind == 4:  # token deletion
                toks[a] = ""
            elif kind == 5:  # token duplication
                toks[a] = toks[a] * 2
            else:  # extreme numbers where numbers are
                numbers = [i for i, t in enumerate(toks) if re.fullmatch(r"-?\d+", t)]
                if numbers:
                    toks[rng.choice(numbers)] = rng.choice(_EXTREMES)
        yield "".join(toks)


def _child(corpus_file: str, seed: int, count: int, progress: str, verdicts: str) -> int:
    """Runs in a fresh interpreter: verify every mutant in process."""
    import lattice_mlir

    corpus = json.loads(Path(corpus_file).read_text(encoding="utf-8"))
    results: list[bool] = []
    silent: list[int] = []
    for i, text in enumerate(mutants(corpus, seed, count)):
        with open(progress, "w", encoding="utf-8") as handle:
            handle.write(text)
        status = lattice_mlir.verify(text)
        if not status.valid and not status.diagnostics.strip():
            silent.append(i)
        if i % 7 == 0 and status.valid:
            lattice_mlir.import_plan(text)  # the importer sees accepted mutants too
        results.append(status.valid)
    Path(verdicts).write_text(json.dumps({"valid": results, "silent": silent}), encoding="utf-8")
    return 0


def _run_child(tmp_path: Path, corpus: list[str], count: int) -> list[bool]:
    corpus_file = tmp_path / "corpus.json"
    corpus_file.write_text(json.dumps(corpus), encoding="utf-8")
    progress = tmp_path / "current.mlir"
    verdicts = tmp_path / "verdicts.json"
    run = subprocess.run(
        [
            sys.executable,
            __file__,
            "child",
            str(corpus_file),
            str(SEED),
            str(count),
            str(progress),
            str(verdicts),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if run.returncode != 0:
        last = progress.read_text(encoding="utf-8") if progress.exists() else "<none>"
        raise AssertionError(
            f"in-process verify died with exit code {run.returncode} "
            f"(stderr: {run.stderr[-2000:]!r}) on this input:\n{last}"
        )
    data = json.loads(verdicts.read_text(encoding="utf-8"))
    assert data["silent"] == [], f"mutants rejected without a diagnostic: {data['silent'][:10]}"
    assert len(data["valid"]) == count
    return [bool(v) for v in data["valid"]]


def test_corpus_itself_is_valid(valid_modules: dict[str, str]) -> None:
    import lattice_mlir

    for name, text in valid_modules.items():
        assert lattice_mlir.verify(text).valid, name


GENERIC_SEEDS = ("unet_block", "weight_packed", "call", "target_conv_transpose3d", "voxelize")


def generic_form(text: str, run_opt: Callable[..., subprocess.CompletedProcess[str]]) -> str:
    """The module in MLIR's generic op form, where mutations reach the property
    and arity paths that the custom parsers would reject early."""
    run = run_opt("--mlir-print-op-generic", "-", stdin=text)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_in_process_and_lattice_opt_survive_mutants(
    tmp_path: Path,
    valid_modules: dict[str, str],
    run_opt: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    corpus = list(valid_modules.values())
    corpus += [generic_form(valid_modules[name], run_opt) for name in GENERIC_SEEDS]
    verdicts = _run_child(tmp_path, corpus, IN_PROCESS_MUTANTS)
    rejected = verdicts.count(False)
    # The mutations must mostly break modules, or the fuzzing proves little.
    assert rejected > IN_PROCESS_MUTANTS // 2, rejected

    texts = list(mutants(corpus, SEED, LATTICE_OPT_MUTANTS))
    for start in range(0, len(texts), BATCH):
        batch = texts[start : start + BATCH]
        path = tmp_path / f"batch{start}.mlir"
        path.write_text("\n// -----\n".join(batch), encoding="utf-8")
        run = run_opt("--split-input-file", "--lattice-verify-artifact", str(path))
        assert run.returncode in (0, 1), (
            f"lattice-opt died with {run.returncode} on batch {path}:\n{run.stderr[-2000:]}"
        )
        any_invalid = not all(verdicts[start : start + BATCH])
        assert (run.returncode == 1) == any_invalid, (
            f"lattice-opt and the in-process verifier disagree on batch starting at {start}"
        )
        if run.returncode == 1:
            assert "error:" in run.stderr


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "child":
    sys.exit(_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]))
