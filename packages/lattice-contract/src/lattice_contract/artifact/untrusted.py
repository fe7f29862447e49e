"""Reading untrusted files and printing untrusted text: the two helpers every command shares.

A path a user names may be a FIFO (reading it blocks forever), a link to
``/dev/zero`` (reading it never ends) or a file far larger than anything the
format needs.  :func:`open_regular_file` opens without blocking, checks that
what was opened (not what the name pointed to a moment earlier) is a regular
file, and :func:`read_regular_file` reads at most a stated number of bytes.

Names inside files (weight keys, case names, an archive's ``producer``, MLIR
diagnostics quoting the graph) reach the terminal when a command prints them.
A name holding ``ESC [ 2 J`` would clear the screen, and others can retitle
the window or write to the clipboard.  :func:`printable` escapes every
control character, so commands print what a file holds, never what it
commands.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "NotRegularFileError",
    "open_regular_file",
    "printable",
    "read_regular_file",
    "special_kind",
]


class NotRegularFileError(ValueError):
    """The path names a FIFO, a device, a directory or a socket, not a regular file."""


def special_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words (``"a FIFO (named pipe)"``)."""
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def open_regular_file(path: str | os.PathLike[str], *, what: str = "file") -> BinaryIO:
    """Open ``path`` for binary reading, refusing anything but a regular file.

    ``O_NONBLOCK`` keeps the open of a FIFO from waiting for a writer; the
    check is on the opened descriptor (``fstat``), so a link swapped in
    between is judged by what it really is.  Raises
    :class:`NotRegularFileError` (a ``ValueError``) naming the kind found;
    ``OSError`` for a missing or unreadable path.
    """
    fd = os.open(os.fspath(path), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFileError(
                f"{what} {str(path)!r} is {special_kind(info.st_mode)}; name a regular file"
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_file(path: str | os.PathLike[str], limit: int, *, what: str = "file") -> bytes:
    """All bytes of the regular file ``path``; a file over ``limit`` bytes is refused.

    The size is checked before reading and again by reading at most
    ``limit + 1`` bytes (a file growing meanwhile is caught too).
    """
    with open_regular_file(path, what=what) as handle:
        size = os.fstat(handle.fileno()).st_size
        data = handle.read(limit + 1) if size <= limit else b""
        if size > limit or len(data) > limit:
            raise ValueError(
                f"{what} {str(Path(path))!r} is larger than {limit:,} bytes; this is not a "
                f"{what} this command reads"
            )
        return data


_CONTROL = frozenset(("Cc", "Cf", "Zl", "Zp"))


def printable(text: object, *, multiline: bool = False) -> str:
    """``text`` with every control and format character escaped, for the terminal.

    Newlines and tabs, ``ESC``, ``DEL``, C1 controls (``\\x9b`` is a one-byte
    CSI), bidirectional overrides and line separators become ``\\xNN`` /
    ``\\uNNNN`` escapes; everything else, accents and CJK included, prints
    as itself.  ``multiline=True`` keeps ``\\n`` and ``\\t`` (for a whole
    message whose line breaks are meant, such as MLIR's diagnostics); every
    other control character is still escaped.
    """
    value = text if isinstance(text, str) else str(text)
    if value.isprintable():
        return value
    if multiline:
        return "\n".join(
            "\t".join("".join(map(_escape, part)) for part in line.split("\t"))
            for line in value.split("\n")
        )
    return "".join(map(_escape, value))


def _escape(char: str) -> str:
    if char.isprintable() and unicodedata.category(char) not in _CONTROL:
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
