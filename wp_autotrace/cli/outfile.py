"""Opening an output file safely: never one of the inputs, never through a symlink.

Every command that writes a file the user names (export, and any other
writer) opens it with open_output, so a mistyped ``-o`` cannot destroy a
log or follow a planted symlink, and the output is as private (0600) as the
log it was made from.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
import tempfile
from typing import IO, Any, Callable, TypeVar

T = TypeVar("T")

STDOUT = "-"
PRIVATE_MODE = 0o600


class UnsafeOutput(Exception):
    """The output path was refused; the message says why and what to do."""


def _identities(paths: list[str]) -> set[tuple[int, int]]:
    """(st_dev, st_ino) of each readable input (symlinks followed: the file read)."""
    found = set()
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        found.add((st.st_dev, st.st_ino))
    return found


def _explain_refusal(path: str, inputs: list[str]) -> None:
    """Name the clearest reason first (the open's flags are what really refuse)."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeOutput(f"{path} is a symlink; refusing to write through it")
    if (st.st_dev, st.st_ino) in _identities(inputs):
        raise UnsafeOutput(f"{path} is one of the input logs; refusing to overwrite it")


class _Replacing(io.TextIOWrapper):
    """A new file beside the one --force replaces: write_file renames it over that name once it is whole. The old
    file is never written into, so another hard link to it keeps its data."""

    def __init__(self, fd: int, temp: str) -> None:
        super().__init__(io.BufferedWriter(io.FileIO(fd, "w")), encoding="utf-8")
        self.temp = temp


def _replacement(path: str) -> IO[str]:
    """A 0600 temp file in path's folder (a rename stays on one filesystem), for the existing regular file at path."""
    folder, name = os.path.split(path)
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder or ".")
    except OSError as exc:
        raise UnsafeOutput(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        return _Replacing(fd, temp)
    except BaseException:
        os.close(fd)
        os.unlink(temp)
        raise


def open_output(path: str, inputs: list[str], force: bool = False) -> IO[str]:
    """Open path for writing text (``-``: stdout); raise UnsafeOutput if that is unsafe.

    Refused: a symlink or a non-regular file at path, one of the inputs, and
    (unless force) any existing file. A new file is created 0600; with force
    an existing regular file is replaced by a new 0600 file (written beside
    it, renamed over it by write_file), never truncated in place.
    """
    if path == STDOUT:
        return sys.stdout
    _explain_refusal(path, inputs)
    if force:
        with contextlib.suppress(OSError):
            if not stat.S_ISREG(os.lstat(path).st_mode):
                raise UnsafeOutput(f"{path} is not a regular file")
            return _replacement(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, PRIVATE_MODE)
    except FileExistsError:
        raise UnsafeOutput(f"{path} exists; choose another -o or add --force") from None
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafeOutput(f"{path} is a symlink; refusing to write through it") from None
        raise UnsafeOutput(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        os.fchmod(fd, PRIVATE_MODE)  # the umask may have narrowed it; never widened
        return os.fdopen(fd, "w", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


class WriteFailed(Exception):
    """Writing the output file failed (a full disk, a quota, an I/O error); the message says so. The
    partial file has been removed: a cut page or trace must not pass for a whole one (nor block the
    next try, which would need --force)."""


def write_file(out: IO[str], path: str, write_all: Callable[[Callable[[str], Any]], T]) -> T:
    """write_all(out.write), then close out (a replacement: renamed over path). Whatever stops it (an OSError:
    WriteFailed raised; anything else, Ctrl-C included: raised as it is) removes the partial file first: an output
    is whole or absent (a replaced file stays as it was)."""
    written = out.temp if isinstance(out, _Replacing) else path
    try:
        with out:
            made = write_all(out.write)
        if written != path:
            os.replace(written, path)
        return made
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(written)
        if isinstance(exc, OSError):
            raise WriteFailed(f"cannot write {path}: {exc.strerror or exc}; the partial file was removed") from None
        raise
