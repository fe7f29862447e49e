"""Safe extraction of hostile ``.tar.gz`` archives, and a bounded JSON reader.

Fixture archives come from elsewhere (a training machine, a bug report), so
everything here assumes the archive was built to hurt the reader:

* member names: no absolute paths, drive letters, ``..``, backslashes, NUL,
  duplicates or case-insensitive collisions, no file under a file;
* member kinds: regular files (and directories, which are skipped) only; no
  symbolic or hard links, devices or FIFOs;
* sizes, before anything is written: a cap per member, on the number of
  members and on the archive file; when the caller passes ``declared``, the
  **first member must be the manifest**, which declares every other
  member's size, so the total extracted size and the expansion ratio
  (total / compressed bytes: a gzip bomb's is near 1000) are checked
  against their caps before the first byte of any other member is written,
  and each member's header size must equal its declaration;
* while streaming: a member that yields more or fewer bytes than its header
  says, and at most :data:`MAX_TRAILING_BYTES` of data after the tar end
  (a bomb hidden there is not decompressed to its end);
* the manifest's JSON: size, nesting depth and integer length are bounded
  (:func:`load_bounded_json`) before Python's parser sees it, and NaN or
  infinity literals are refused.

Memory stays bounded whatever the archive: it is streamed once in 1 MiB
chunks (the gzip-bomb test measures the reader's peak RSS).  Every refusal
is a :class:`FixtureArchiveError` whose ``reason`` is a stable short code
and whose message names the member.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import math
import re
import tarfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final

import numpy as np
from lattice_contract.artifact import NotRegularFileError, open_regular_file

__all__ = [
    "MAX_TRAILING_BYTES",
    "ArchiveLimits",
    "FixtureArchiveError",
    "check_headers",
    "extract_members",
    "find_member",
    "load_bounded_json",
]

MAX_TRAILING_BYTES: Final = 1 << 20
"""Decompressed bytes tolerated after the tar end-of-archive blocks (tar pads to 10 KiB)."""

_CHUNK: Final = 1 << 20


class FixtureArchiveError(ValueError):
    """A fixture archive (or the data given to the writer) is unusable.

    ``reason`` is a stable short code (``"parent_reference"``, ``"link"``,
    ``"checksum_mismatch"``, ...) so that callers and tests can tell failures
    apart without matching message text; the message says what is wrong and
    what to do about it.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{message} [{reason}]")
        self.reason = reason


@dataclass(frozen=True)
class ArchiveLimits:
    """Caps that bound what a hostile archive can make the reader do."""

    max_archive_bytes: int = 1 << 30
    max_member_bytes: int = 512 << 20
    max_total_bytes: int = 2 << 30
    max_members: int = 10_000
    """Most members read (a fixture case is about five files; 99,000 empty members took
    tens of seconds to extract, for nothing a fixture needs)."""
    max_expansion: int = 200
    """Largest extracted / compressed size ratio (real fixtures: about 1-3)."""
    max_manifest_bytes: int = 16 << 20
    max_json_depth: int = 32
    max_int_digits: int = 19


# ---------------------------------------------------------------------------
# JSON with bounds.

_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def _json_depth(raw: bytes) -> int:
    """Deepest bracket nesting of a JSON text (strings blanked out first); vectorised."""
    text = np.frombuffer(_JSON_STRING.sub(b'""', raw), dtype=np.uint8)
    if text.size == 0:
        return 0
    step = np.isin(text, (ord("{"), ord("["))).astype(np.int64)
    step -= np.isin(text, (ord("}"), ord("]")))
    return int(np.cumsum(step).max(initial=0))


def load_bounded_json(raw: bytes, where: str, limits: ArchiveLimits) -> Any:
    """Parse JSON whose size, depth and integer lengths are bounded; no NaN/Infinity.

    Python's own parser would take a 100,000-deep text to a ``RecursionError``,
    spend quadratic time on (or refuse with a bare ``ValueError``) an integer
    of thousands of digits, and accept ``NaN`` as a tolerance.
    """
    if len(raw) > limits.max_manifest_bytes:
        raise FixtureArchiveError(
            "bad_manifest",
            f"{where} is {len(raw)} bytes, over the {limits.max_manifest_bytes}-byte cap",
        )
    depth = _json_depth(raw)
    if depth > limits.max_json_depth:
        raise FixtureArchiveError(
            "bad_manifest",
            f"{where} nests {depth} levels deep, over the limit of {limits.max_json_depth}",
        )

    def parse_int(text: str) -> int:
        if len(text.lstrip("-")) > limits.max_int_digits:
            raise FixtureArchiveError(
                "bad_manifest",
                f"{where} holds an integer of {len(text)} digits ({text[:12]}...); "
                f"integers are limited to {limits.max_int_digits} digits",
            )
        return int(text)

    def parse_float(text: str) -> float:
        if len(text) > 64:
            raise FixtureArchiveError(
                "bad_manifest", f"{where} holds a number literal of {len(text)} characters"
            )
        value = float(text)
        if not math.isfinite(value):  # 1e999 overflows to infinity without saying so
            raise FixtureArchiveError(
                "bad_manifest", f"{where} holds {text}, which is not a finite number"
            )
        return value

    def parse_constant(name: str) -> float:
        raise FixtureArchiveError(
            "bad_manifest", f"{where} holds {name}, which is not a JSON number"
        )

    try:
        return json.loads(
            raw, parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant
        )
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise FixtureArchiveError("bad_manifest", f"{where} is not JSON: {exc}") from exc


# ---------------------------------------------------------------------------
# Members.


MAX_NAME_BYTES = 255
"""Longest name part of a member (the file-system limit; longer ones were an OSError)."""

MAX_NAME_DEPTH = 32
"""Most levels of a member's path (a fixture is two deep)."""


def _member_path(raw_name: str) -> PurePosixPath:
    """Check a member name and return it as a relative path; refuse anything unsafe."""
    if not raw_name or "\x00" in raw_name:
        raise FixtureArchiveError(
            "bad_name", f"archive member with an empty or NUL name {raw_name!r}"
        )
    if "\\" in raw_name:
        raise FixtureArchiveError(
            "bad_name", f"archive member {raw_name!r} contains a backslash; use '/' separators"
        )
    if raw_name.startswith("/") or re.match(r"^[A-Za-z]:", raw_name):
        raise FixtureArchiveError(
            "absolute_path",
            f"archive member {raw_name!r} is an absolute path; fixture archives hold "
            "relative paths only",
        )
    parts = [p for p in raw_name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise FixtureArchiveError(
            "parent_reference",
            f"archive member {raw_name!r} contains '..', which would escape the extraction "
            "directory; rebuild the archive with write_fixture_archive",
        )
    if not parts:
        raise FixtureArchiveError("bad_name", f"archive member {raw_name!r} names no file")
    long = [p for p in parts if len(p.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES]
    if long or len(parts) > MAX_NAME_DEPTH:
        raise FixtureArchiveError(
            "bad_name",
            f"archive member {raw_name[:80]!r}... has a name part over {MAX_NAME_BYTES} bytes "
            f"or more than {MAX_NAME_DEPTH} levels, which no file system can extract",
        )
    return PurePosixPath(*parts)


def _copy_limited(source: Any, dest: Path, name: str, size: int, limits: ArchiveLimits) -> str:
    digest = hashlib.sha256()
    written = 0
    with open(dest, "xb") as out:
        while chunk := source.read(_CHUNK):
            written += len(chunk)
            if written > size or written > limits.max_member_bytes:
                raise FixtureArchiveError(
                    "member_too_large", f"archive member {name!r} is larger than its header says"
                )
            digest.update(chunk)
            out.write(chunk)
    if written != size:
        raise FixtureArchiveError(
            "truncated", f"archive member {name!r} ended after {written} of {size} bytes"
        )
    return digest.hexdigest()


def _check_kind(member: tarfile.TarInfo, limits: ArchiveLimits) -> None:
    if member.issym() or member.islnk():
        raise FixtureArchiveError(
            "link",
            f"archive member {member.name!r} is a link (to {member.linkname!r}); "
            "fixture archives hold regular files only",
        )
    if not member.isreg() and not member.isdir():
        raise FixtureArchiveError(
            "special_file",
            f"archive member {member.name!r} is a device, FIFO or other special "
            "file; fixture archives hold regular files only",
        )
    if member.size > limits.max_member_bytes:
        raise FixtureArchiveError(
            "member_too_large",
            f"archive member {member.name!r} is {member.size} bytes, over the "
            f"{limits.max_member_bytes}-byte cap",
        )


def _check_declared(
    declared: Mapping[str, int], first: str, compressed: int, so_far: int, limits: ArchiveLimits
) -> None:
    """The manifest's totals against the caps, before any other member is written."""
    total = so_far + sum(declared.values())
    if total > limits.max_total_bytes:
        raise FixtureArchiveError(
            "archive_too_large",
            f"{first} declares {total} bytes of members, over the {limits.max_total_bytes}-byte "
            "cap; nothing was extracted",
        )
    if total > limits.max_expansion * max(compressed, 1):
        raise FixtureArchiveError(
            "archive_too_large",
            f"{first} declares {total} bytes of members in a {compressed}-byte archive, an "
            f"expansion over {limits.max_expansion}x (a gzip bomb?); nothing was extracted",
        )


def _archive_size(archive: Path, limits: ArchiveLimits) -> int:
    """The archive's size on disk, refused over the cap before anything is read."""
    try:
        size = archive.stat().st_size
    except OSError as exc:
        raise FixtureArchiveError(
            "missing", f"cannot read fixture archive {archive}: {exc}"
        ) from exc
    if size > limits.max_archive_bytes:
        raise FixtureArchiveError(
            "archive_too_large",
            f"{archive} is {size} bytes, over the {limits.max_archive_bytes}-byte cap",
        )
    return size


@contextlib.contextmanager
def _streamed(archive: Path) -> Iterator[tuple[gzip.GzipFile, tarfile.TarFile]]:
    """The archive as a gzip stream and a tar read from it once, front to back."""
    try:
        raw = open_regular_file(archive, what="fixture archive")
    except NotRegularFileError as exc:  # a FIFO blocks, /dev/zero never ends
        raise FixtureArchiveError("not_a_file", str(exc)) from None
    with (
        raw,
        gzip.GzipFile(fileobj=raw, mode="rb") as gz,
        tarfile.open(fileobj=gz, mode="r|") as tar,
    ):
        yield gz, tar


def _members(tar: tarfile.TarFile, limits: ArchiveLimits) -> Iterator[tarfile.TarInfo]:
    for count, member in enumerate(tar, start=1):
        if count > limits.max_members:
            raise FixtureArchiveError(
                "too_many_members", f"archive has more than {limits.max_members} members"
            )
        yield member


def extract_members(
    archive: Path,
    dest: Path,
    limits: ArchiveLimits,
    *,
    manifest: str | None = None,
    declared: Callable[[bytes], Mapping[str, int]] | None = None,
) -> dict[str, tuple[int, str]]:
    """Stream-extract regular files into ``dest``; return {name: (size, sha256)}.

    With ``manifest`` and ``declared``, the first member must be ``manifest``;
    ``declared(its bytes)`` returns every other member's size, checked (total,
    expansion, then per member) before that member is written.
    """
    archive_size = _archive_size(archive, limits)
    seen: dict[str, str] = {}
    files: dict[str, tuple[int, str]] = {}
    sizes: Mapping[str, int] | None = None
    total = 0
    try:
        with _streamed(archive) as (gz, tar):
            for member in _members(tar, limits):
                key = _member_path(member.name).as_posix()
                folded = key.casefold()
                if folded in seen:
                    raise FixtureArchiveError(
                        "duplicate_member",
                        f"archive member {member.name!r} appears twice (or collides with "
                        f"{seen[folded]!r} on a case-insensitive file system)",
                    )
                seen[folded] = member.name
                _check_kind(member, limits)
                if member.isdir():
                    continue
                if key == manifest and member.size > limits.max_manifest_bytes:
                    raise FixtureArchiveError(
                        "bad_manifest",
                        f"archive member {member.name!r} is {member.size} bytes, over the "
                        f"{limits.max_manifest_bytes}-byte cap for a manifest",
                    )
                if declared is not None and sizes is None and key != manifest:
                    raise FixtureArchiveError(
                        "manifest_not_first",
                        f"archive member {member.name!r} comes before {manifest}; the manifest "
                        "must be the first member so that sizes are known before writing "
                        "(write archives with write_fixture_archive)",
                    )
                if sizes is not None and key not in sizes:
                    raise FixtureArchiveError(
                        "unlisted_member",
                        f"archive member {member.name!r} is not in the manifest; refusing "
                        "extra files",
                    )
                if sizes is not None and sizes[key] != member.size:
                    raise FixtureArchiveError(
                        "checksum_mismatch",
                        f"archive member {member.name!r} is {member.size} bytes but the "
                        f"manifest declares {sizes[key]}",
                    )
                total += member.size
                if total > limits.max_total_bytes:
                    raise FixtureArchiveError(
                        "archive_too_large",
                        f"archive expands past the {limits.max_total_bytes}-byte cap at member "
                        f"{member.name!r}",
                    )
                out = dest.joinpath(*PurePosixPath(key).parts)
                try:
                    out.parent.mkdir(parents=True, exist_ok=True)
                except (FileExistsError, NotADirectoryError) as exc:
                    raise FixtureArchiveError(
                        "conflicting_member",
                        f"archive member {member.name!r} lies under a file of the same name",
                    ) from exc
                if out.exists():
                    raise FixtureArchiveError(
                        "conflicting_member",
                        f"archive member {member.name!r} collides with a directory",
                    )
                source = tar.extractfile(member)
                assert source is not None
                files[key] = (
                    member.size,
                    _copy_limited(source, out, member.name, member.size, limits),
                )
                if declared is not None and sizes is None:
                    sizes = declared(out.read_bytes())
                    _check_declared(sizes, key, archive_size, total, limits)
            # tar stops at its end-of-archive blocks; read the gzip stream to its end
            # as well so that a cut-off trailer (CRC, length) is noticed, but never
            # decompress more than a tar's padding of it.
            trailing = 0
            while chunk := gz.read(_CHUNK):
                trailing += len(chunk)
                if trailing > MAX_TRAILING_BYTES:
                    raise FixtureArchiveError(
                        "trailing_data",
                        f"{archive} holds more than {MAX_TRAILING_BYTES} bytes after the tar "
                        "end (hidden data or a gzip bomb); rebuild the archive",
                    )
    except FixtureArchiveError:
        raise
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise FixtureArchiveError(
            "truncated_or_corrupt",
            f"{archive} is truncated or not a gzip-compressed tar file ({exc}); "
            "copy the archive again",
        ) from exc
    return files


def find_member(
    archive: Path,
    wanted: Callable[[PurePosixPath], bool],
    limits: ArchiveLimits,
    *,
    max_bytes: int,
) -> bytes | None:
    """The first regular member ``wanted`` accepts, read without writing anything.

    The member names, kinds and sizes pass :func:`extract_members`' checks,
    and the sizes the headers declare so far are held to the total and
    expansion caps *before* any member's data is decompressed or skipped, so
    sniffing a gzip bomb stops at its first oversized header.  Returns at
    most ``max_bytes + 1`` bytes (the caller refuses an oversized member by
    its length) or None when no member is wanted.
    """
    compressed = _archive_size(archive, limits)
    total = 0
    try:
        with _streamed(archive) as (_, tar):
            for member in _members(tar, limits):
                path = _member_path(member.name)
                _check_kind(member, limits)
                total += member.size
                if total > min(limits.max_total_bytes, limits.max_expansion * max(compressed, 1)):
                    raise FixtureArchiveError(
                        "archive_too_large",
                        f"{archive} declares {total} bytes up to member {member.name!r} in a "
                        f"{compressed}-byte archive, over the caps ({limits.max_total_bytes} "
                        f"bytes, {limits.max_expansion}x expansion)",
                    )
                if member.isreg() and wanted(path):
                    source = tar.extractfile(member)
                    return source.read(max_bytes + 1) if source is not None else b""
    except FixtureArchiveError:
        raise
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
        raise FixtureArchiveError(
            "truncated_or_corrupt", f"{archive} is truncated or not a gzip-compressed tar ({exc})"
        ) from exc
    return None


def check_headers(archive: Path, limits: ArchiveLimits) -> None:
    """Every member header against the caps (names, kinds, sizes, total, expansion); writes nothing.

    For archives without a manifest that declares the sizes (upstream fixture
    trees): run before :func:`extract_members`, so a gzip bomb is refused at
    the header that crosses a cap instead of after its bytes are on disk.
    """
    find_member(archive, lambda _: False, limits, max_bytes=0)
