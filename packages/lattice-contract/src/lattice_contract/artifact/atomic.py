"""Writes that never lose the destination: bundles, converted weights, reports, archives.

Every writer of a user-visible file or directory goes through
:func:`atomic_write_file` or :func:`atomic_write_dir`.  Both:

* take a **lock** beside the destination (``.<name>.lock``, ``flock``), so a
  second process saving the same path at the same time gets
  :class:`WriterLockedError` ("another writer holds this path") at once
  instead of a bare ``OSError`` from a rename that lost a race; the kernel
  drops the lock when its holder dies, even under ``kill -9``;
* **clean up** the hidden leftovers (``.<name>.tmp-*``, ``.<name>.old-*``) of
  earlier interrupted saves to the same path, once the lock is held and only
  those older than it: a temporary tree of a writer killed mid-save would
  otherwise stay on disk forever;
* write into a hidden sibling, ``fsync`` every file and the directory, and
  only then make it the destination, in one step: ``os.replace`` for a file,
  and for a directory that already exists ``renameat2(RENAME_EXCHANGE)``
  (Linux, through ctypes), which swaps the two trees atomically so the
  destination is the complete old tree or the complete new one at every
  instant, killed or not.  Where the exchange is unavailable (another OS, a
  file system without it) the old tree is renamed aside only after the new
  one is complete and synced, and put back if the second rename fails; a
  writer killed exactly between those two renames leaves the old tree in
  ``.<name>.old-*``, which the next save (or :func:`recover_interrupted`)
  moves back before doing anything else;
* give the result the **modes** ``open()``/``mkdir()`` would: ``0o666`` and
  ``0o777`` minus the umask (``mkstemp``/``mkdtemp`` create 0600/0700, which
  other accounts, a serving container or CI, cannot read);
* optionally move a **companion** file with the destination (a manifest of
  what was written beside it, such as ``lattice migrate``'s
  ``DST.migration.json``, which cannot live inside an artifact bundle).  Two
  paths cannot change in one rename, so the companion records the
  destination's :func:`fingerprint` and is staged complete and synced as
  ``.<companion>.pending-<fingerprint>`` *before* the destination is swapped,
  then renamed over the companion.  A writer killed between the swap and
  that rename leaves the new destination and its pending companion; the next
  save to the destination (or :func:`recover_interrupted` with
  ``companion=``) finds the pending file whose fingerprint is the
  destination's and moves it into place, and drops pending files of swaps
  that never happened.  A companion on disk therefore always describes a
  destination whose fingerprint it names.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import hashlib
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from lattice_contract.artifact.untrusted import open_regular_file, special_kind

__all__ = [
    "Companion",
    "OutputClashError",
    "WriterLockedError",
    "atomic_write_dir",
    "atomic_write_file",
    "check_outputs",
    "default_dir_mode",
    "default_file_mode",
    "fingerprint",
    "path_lock",
    "recover_interrupted",
]

_AT_FDCWD: Final = -100
_RENAME_EXCHANGE: Final = 2

_test_hook: Callable[[str], None] | None = None
"""Called with a step name (``"before_swap"``, ``"between_renames"``, ``"after_swap"``,
``"before_companion"``).

Tests set it in a child process to pause a writer at an exact point of the
swap and kill it there; it is never set in normal use.
"""


class WriterLockedError(RuntimeError):
    """Another process (or thread) is saving to the same destination right now."""


class OutputClashError(ValueError):
    """An output would replace an input of the command, or a file nobody named as output."""


@dataclass(frozen=True)
class Companion:
    """A file that describes the destination and moves with it (see the module docs).

    ``render(fingerprint)`` returns the companion's text for a destination
    whose :func:`fingerprint` is ``fingerprint`` (record it in the text, so a
    reader can check the pair).
    """

    path: Path
    render: Callable[[str], str]
    replace: bool = True
    """Whether an existing file at ``path`` may be replaced (False: refuse it)."""


def fingerprint(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes, or of a directory tree's relative names, sizes and bytes.

    Names are sorted and POSIX-spelled, so the value depends only on what is
    in the tree, not on the order a file system lists it or on modes.
    """
    root = Path(path)
    if not root.is_dir():
        return _file_sha256(root)
    digest = hashlib.sha256()
    files = sorted(
        (Path(d) / n).relative_to(root).as_posix() for d, _, names in os.walk(root) for n in names
    )
    for name in files:
        item = root / name
        digest.update(f"{name}\0{item.stat().st_size}\0{_file_sha256(item)}\n".encode())
    return digest.hexdigest()


def _file_sha256(path: Path) -> str:
    # A regular file only: a FIFO would block the hash and /dev/zero never end it
    # (NotRegularFileError, a ValueError).
    digest = hashlib.sha256()
    with open_regular_file(path) as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _umask() -> int:
    # /proc avoids os.umask(0)'s window, in which another thread's new file
    # would be created world-writable.
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    current = os.umask(0o022)
    os.umask(current)
    return current


def default_file_mode() -> int:
    """``0o666`` minus the umask: the mode ``open()`` would give a new file."""
    return 0o666 & ~_umask()


def default_dir_mode() -> int:
    """``0o777`` minus the umask: the mode ``mkdir()`` would give a new directory."""
    return 0o777 & ~_umask()


def _hook(step: str) -> None:
    if _test_hook is not None:
        _test_hook(step)


def _fsync_path(path: Path, *, directory: bool = False) -> None:
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems refuse fsync on directories
        pass
    finally:
        os.close(fd)


def _parent(target: Path) -> Path:
    return target.parent if str(target.parent) else Path(".")


def _lock_path(target: Path) -> Path:
    return _parent(target) / f".{target.name}.lock"


@contextlib.contextmanager
def path_lock(path: str | os.PathLike[str]) -> Iterator[float]:
    """Hold the writer lock of ``path``; yields the time it was taken.

    Non-blocking: a held lock raises :class:`WriterLockedError` at once.  The
    lock file is removed on release (while still held, and a new holder
    checks that the file it locked is still the one on disk, so no two
    writers ever both believe they hold it).
    """
    import fcntl

    target = Path(path)
    lock = _lock_path(target)
    for _ in range(100):
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise WriterLockedError(
                f"another writer holds {str(target)!r} (lock {lock.name} is taken): a second "
                "save to the same path is running; wait for it to finish, or save elsewhere"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the previous holder removed this file as we locked it; retry
    else:  # pragma: no cover - would need 100 lost races in a row
        raise WriterLockedError(f"could not take the writer lock of {str(target)!r}")
    try:
        yield time.time()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)


def _leftovers(target: Path) -> list[Path]:
    parent = _parent(target)
    prefixes = (f".{target.name}.tmp-", f".{target.name}.old-")
    try:
        return [p for p in parent.iterdir() if p.name.startswith(prefixes)]
    except OSError:
        return []


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def recover_interrupted(
    path: str | os.PathLike[str],
    *,
    before: float | None = None,
    companion: str | os.PathLike[str] | None = None,
) -> None:
    """Undo what an interrupted save to ``path`` left behind (call with the lock held).

    If the destination is missing but an old tree survives in a backup, the
    newest backup is moved back; then every leftover temporary or backup
    sibling older than ``before`` (default: now) is removed.  With
    ``companion``, a pending companion staged for the destination now on
    disk is moved into place and the others are removed.
    """
    target = Path(path)
    cutoff = time.time() if before is None else before
    stale = []
    for item in _leftovers(target):
        try:
            if item.lstat().st_mtime <= cutoff:
                stale.append(item)
        except OSError:
            continue
    if not os.path.lexists(target):
        backups = [p for p in stale if p.name.startswith(f".{target.name}.old-")]
        if backups:
            newest = max(backups, key=lambda p: p.lstat().st_mtime)
            os.rename(newest, target)
            stale.remove(newest)
    for item in stale:
        _remove(item)
    if companion is not None:
        recover_interrupted(companion, before=before)
        _settle_companion(target, Path(companion))


def _pending_prefix(companion: Path) -> str:
    return f".{companion.name}.pending-"


def _settle_companion(target: Path, companion: Path) -> None:
    """Finish or drop pending companions: only the one staged for ``target``'s content stays."""
    prefix = _pending_prefix(companion)
    try:
        pending = [p for p in _parent(companion).iterdir() if p.name.startswith(prefix)]
    except OSError:
        return
    if not pending:
        return
    current = fingerprint(target) if os.path.lexists(target) else None
    for item in pending:
        if current is not None and item.name == prefix + current:
            os.replace(item, companion)
            _fsync_path(_parent(companion), directory=True)
        else:
            _remove(item)


def _stage_companion(companion: Companion, destination_fingerprint: str) -> Path:
    """Write the companion complete and synced as its pending file; return that path."""
    parent = _parent(companion.path)
    fd, name = tempfile.mkstemp(prefix=f".{companion.path.name}.tmp-", dir=parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(companion.render(destination_fingerprint))
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, default_file_mode())
        pending = parent / (_pending_prefix(companion.path) + destination_fingerprint)
        os.replace(tmp, pending)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_path(parent, directory=True)
    return pending


def _same_or_inside(path: Path, other: Path) -> bool:
    """Whether ``path`` is ``other`` (by name or by inode) or lies inside the tree ``other``."""
    try:
        if os.path.exists(path) and os.path.exists(other) and os.path.samefile(path, other):
            return True
    except OSError:
        pass
    a, b = Path(os.path.realpath(path)), Path(os.path.realpath(other))
    return a == b or b in a.parents


def check_outputs(
    outputs: Iterable[str | os.PathLike[str]],
    inputs: Iterable[str | os.PathLike[str]] = (),
    *,
    existing: Iterable[str | os.PathLike[str]] = (),
) -> None:
    """Refuse outputs that are, hold or lie in an input or each other; existing unnamed outputs.

    An output that is (or links to) a device, a FIFO or a socket is refused
    too (``--report /dev/stdout``): the writer replaces files, never those.

    Every writer of this module calls it with its destination (and
    companion); commands may call it earlier, before their slow work, with
    every output they will write (``--report x --plot x`` would write the
    second over the first).  ``existing`` lists outputs that must not exist
    yet (files the user did not name as the destination).  Raises
    :class:`OutputClashError` naming both paths and the fix.
    """
    sources = [Path(p) for p in inputs]
    targets = [Path(p) for p in outputs]
    for output in targets:
        _check_replaceable(output)
    for index, output in enumerate(targets):
        for other in targets[index + 1 :]:
            if _same_or_inside(output, other) or _same_or_inside(other, output):
                raise OutputClashError(
                    f"refusing to write {str(output)!r} and {str(other)!r}: one would replace "
                    "(or lie inside) the other; name a separate path for each output"
                )
    for output in targets:
        for source in sources:
            if _same_or_inside(output, source):
                raise OutputClashError(
                    f"refusing to write {str(output)!r}: it is (or lies inside) the input "
                    f"{str(source)!r}, which this command reads; name another output path"
                )
            if _same_or_inside(source, output):
                raise OutputClashError(
                    f"refusing to write {str(output)!r}: it would replace the input "
                    f"{str(source)!r} inside it; name another output path"
                )
    for output in (Path(p) for p in existing):
        if os.path.lexists(output):
            raise OutputClashError(
                f"refusing to overwrite {str(output)!r}: it exists and was not named as the "
                "destination; remove it, name another path, or pass --force"
            )


def _check_writer(
    target: Path, companion: Companion | None, inputs: Iterable[Any], overwrite: bool
) -> None:
    outputs = [target] + ([companion.path] if companion is not None else [])
    for output in outputs:
        folder = _parent(output)
        if not folder.is_dir():  # else the lock file's name would be the error's
            raise FileNotFoundError(
                errno.ENOENT,
                f"cannot write {str(output)!r}: the folder {str(folder)!r} does not exist; "
                "create it first",
            )
    existing = [] if overwrite else [target]
    if companion is not None and not companion.replace:
        existing.append(companion.path)
    check_outputs(outputs, inputs, existing=existing)


def _check_replaceable(output: Path) -> None:
    """Refuse a destination that is (or links to) a device, a FIFO or a socket.

    The writer replaces the destination's directory entry: ``--report
    /dev/stdout`` or ``-o /dev/null`` would put a lock file in ``/dev`` and,
    for an account allowed to write there, swap the device node for a
    regular file.  Such a path never names a file the user means to replace.
    """
    if _system_folder(output):
        raise OutputClashError(
            f"refusing to write {str(output)!r}: it lies in {_system_folder(output)}, whose "
            "entries are devices and the process's own descriptors, never files this "
            "command replaces; name a regular file path"
        )
    try:
        mode = os.stat(output).st_mode
    except OSError:  # missing (or a dangling link): a new file
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise OutputClashError(
            f"refusing to write {str(output)!r}: it is {special_kind(mode)}"
            f"{' (through a link)' if os.path.islink(output) else ''}, not a file this "
            "command replaces; name a regular file path"
        )


def _system_folder(output: Path) -> str | None:
    """``/dev`` or ``/proc`` when ``output``'s folder resolves there, else None.

    ``/dev/stdout`` links to ``/proc/self/fd/1``, which is a regular file when
    stdout is redirected to one: judged by what it points to, the link would
    be replaced, taking ``/dev/stdout`` away (for an account allowed to write
    in ``/dev``).  ``/dev/shm``, a real file system, is not such a folder.
    """
    folder = os.path.realpath(_parent(output))
    for system in ("/dev", "/proc"):
        if folder == system or (system == "/proc" and folder.startswith("/proc/")):
            return system
    return None


@contextlib.contextmanager
def _locked(target: Path, companion: Companion | None) -> Iterator[float]:
    """The destination's lock (and the companion's), with earlier leftovers recovered."""
    with contextlib.ExitStack() as stack:
        locked_at = stack.enter_context(path_lock(target))
        if companion is not None:
            stack.enter_context(path_lock(companion.path))
        recover_interrupted(
            target, before=locked_at, companion=companion.path if companion else None
        )
        yield locked_at


def _place_companion(pending: Path | None, companion: Companion | None) -> None:
    if pending is None or companion is None:
        return
    _hook("before_companion")
    os.replace(pending, companion.path)
    _fsync_path(_parent(companion.path), directory=True)


@functools.cache
def _renameat2() -> Any:
    """libc's ``renameat2``, looked up once per process; None where libc has none.

    The process's own symbols come first (``CDLL(None)``: glibc is loaded),
    so a save never runs ``ctypes.util.find_library``, which forks
    ``ldconfig``: a process forked while the writer lock is held shares the
    lock until it execs, and a writer killed in that window left the lock
    taken for a moment after its death.
    """
    if not sys.platform.startswith("linux"):
        return None
    finders: tuple[Callable[[], str | None], ...] = (
        lambda: None,
        lambda: ctypes.util.find_library("c"),
    )
    for find in finders:
        try:
            function = ctypes.CDLL(find(), use_errno=True).renameat2
        except (OSError, AttributeError):
            continue
        function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
        function.argtypes += [ctypes.c_uint]
        function.restype = ctypes.c_int
        return function
    return None


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths with renameat2(RENAME_EXCHANGE); False where unsupported."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(b))


_exchange_impl: Callable[[Path, Path], bool] = _exchange


def _apply_modes(root: Path) -> None:
    file_mode, dir_mode = default_file_mode(), default_dir_mode()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            item = Path(dirpath) / name
            os.chmod(item, file_mode)
            _fsync_path(item)
        for name in dirnames:
            os.chmod(Path(dirpath) / name, dir_mode)
        _fsync_path(Path(dirpath), directory=True)
    os.chmod(root, dir_mode)


def atomic_write_dir(
    path: str | os.PathLike[str],
    write: Callable[[Path], object],
    *,
    check_existing: Callable[[Path], None] | None = None,
    companion: Companion | None = None,
    inputs: Iterable[str | os.PathLike[str]] = (),
    overwrite: bool = True,
) -> Path:
    """Create or replace the directory ``path`` with what ``write(tmp)`` puts in ``tmp``.

    ``check_existing(path)`` runs under the lock when ``path`` exists and may
    raise to refuse the overwrite.  On any error (or kill) the destination is
    the old complete tree; see the module docstring for the swap, for
    ``companion`` and for ``inputs`` and ``overwrite`` (:func:`check_outputs`).
    """
    target = Path(path)
    parent = _parent(target)
    _check_writer(target, companion, inputs, overwrite)
    with _locked(target, companion):
        exists = os.path.lexists(target)
        if exists and check_existing is not None:
            check_existing(target)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=parent))
        pending: Path | None = None
        swapped = False
        try:
            write(tmp)
            _apply_modes(tmp)
            if companion is not None:
                pending = _stage_companion(companion, fingerprint(tmp))
            _hook("before_swap")
            if not exists:
                os.rename(tmp, target)
                swapped = True
            elif _exchange_impl(tmp, target):
                swapped = True
                _hook("after_swap")
                shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the old tree
            else:
                backup = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=parent))
                backup.rmdir()
                os.rename(target, backup)
                _hook("between_renames")
                try:
                    os.rename(tmp, target)
                except BaseException:
                    os.rename(backup, target)
                    raise
                swapped = True
                shutil.rmtree(backup, ignore_errors=True)
            _fsync_path(parent, directory=True)
        except BaseException:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
            if pending is not None and not swapped:
                _remove(pending)
            raise
        _place_companion(pending, companion)
    return target


def atomic_write_file(
    path: str | os.PathLike[str],
    write: Callable[[Path], object],
    *,
    check_existing: Callable[[Path], None] | None = None,
    companion: Companion | None = None,
    inputs: Iterable[str | os.PathLike[str]] = (),
    overwrite: bool = True,
) -> Path:
    """Create or replace the file ``path`` with what ``write(tmp)`` writes to ``tmp``.

    ``write`` receives a fresh path of the destination's name inside a
    private hidden directory and may reopen it by name (safetensors and PLY
    writers do; whatever else they create there goes with the directory).
    The file is synced and given the umask's mode before ``os.replace``
    moves it into place.  ``check_existing``, ``companion``, ``inputs`` and
    ``overwrite`` as for :func:`atomic_write_dir`.
    """
    target = Path(path)
    parent = _parent(target)
    _check_writer(target, companion, inputs, overwrite)
    if target.is_dir() and not target.is_symlink():
        raise OutputClashError(
            f"refusing to write {str(target)!r}: it is a directory; name a file path"
        )
    with _locked(target, companion):
        if os.path.lexists(target) and check_existing is not None:
            check_existing(target)
        box = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=parent))
        tmp = box / target.name
        tmp.touch(0o600)
        pending: Path | None = None
        try:
            write(tmp)
            os.chmod(tmp, default_file_mode())
            _fsync_path(tmp)
            if companion is not None:
                pending = _stage_companion(companion, fingerprint(tmp))
            _hook("before_swap")
            os.replace(tmp, target)
        except BaseException:
            if pending is not None:
                _remove(pending)
            raise
        finally:
            shutil.rmtree(box, ignore_errors=True)
        _fsync_path(parent, directory=True)
        _place_companion(pending, companion)
    return target
