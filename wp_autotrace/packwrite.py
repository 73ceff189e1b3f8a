"""The start pack's writer: imported by the loader (wp_autotrace/__init__.py load()) only where a start found no
current pack and may write bytecode, which is a start after an install or an edit: every other traced start loaded
this code with the package and never ran it (~24K instructions each; BENCHMARKS.md). A start under -B or
PYTHONDONTWRITEBYTECODE writes no pack and never imports it. The pack's layout is the loader's: this writes the
bytes it is given, atomically, and tells whether the joined start module (tools/join_start.py's) was made from
the sources beside it, so that the pack may hold its code in place of theirs. The loader takes this module out of
sys.modules again after the write, so a start that wrote its pack leaves the modules one that read it does.
"""

import marshal
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The joined module's first line: its sources' sizes and checksums, in the join's order, when it was made
_JOINED_FROM = "# joined from:"
# A checksum with no import (zlib's would stay in the host's sys.modules after the start that writes the pack): a
# source's bytes as one number modulo this prime, byte i weighing 256**i. 256's order modulo it is over 2**21 (checked
# by tests/test_join_start.py), so in a source under 2 MiB no two bytes weigh the same: a change of one byte, or a
# swap of two different bytes, always changes it (2**61 - 1 did not: 256**61 is 1 there, so bytes 61 apart swapped)
_PRIME = (1 << 64) - 59


def joined_from(sources: "list[str]") -> str:
    """The joined module's first line for these source files as they are now (the tool writes it)."""
    parts = []
    for path in sources:
        with open(path, "rb") as f:
            data = f.read()
        parts.append(f"{len(data)}:{int.from_bytes(data, 'little') % _PRIME:x}")
    return f"{_JOINED_FROM} {' '.join(parts)}\n"


def write_pack(path: str, want: "tuple[Any, ...]", made: "list[tuple[str, Any]]", paths: "list[str]",
               like: str) -> None:
    """The loader's pack for its stamps want: START's (pyc path, code) made by this start, LATER's as later() holds
    them (bytes), and the joined module's code in place of START's code modules' where it was made from their
    sources as they are now (paths: the loader's, START's, LATER's, then JOINED's); written as write() does."""
    loader = sys.modules[__name__.rpartition(".")[0]]
    start = loader.START
    for name in loader.LATER:  # the LATER modules' code as later() reads it: marshalled
        _, cached, code = loader.later_code[name]
        made.append((cached, code if type(code) is bytes else marshal.dumps(code)))
    joined_code = joined(paths[-1], paths[len(loader.PACKAGES):len(start)], start[-1])
    if joined_code is not None:
        for i in range(len(loader.PACKAGES), len(start)):
            made[i] = (made[i][0], None)
    write(path, marshal.dumps((*want, tuple(made), joined_code)), like)


def joined(path: str, sources: "list[str]", name: str) -> "tuple[str, Any] | None":
    """(its pyc path, its code) of the joined module at path, made as the module name (its own loader reads its pyc,
    or compiles it and writes one), where it was made from sources as they are now; else None. Never raises."""
    if not is_joined_from(path, sources):
        return None
    try:
        ext = sys.modules["_frozen_importlib_external"]
        return ext.cache_from_source(path), ext.SourceFileLoader(name, path).get_code(name)
    except Exception:  # its pyc cannot be made (a syntax error: an edit by hand): the sources' code serves
        return None


def is_joined_from(joined: str, sources: "list[str]") -> bool:
    """Whether the joined module at path joined was made from these sources as they are now (a source edited since,
    or no joined module: its code is not theirs, and the pack holds theirs). Never raises."""
    try:
        with open(joined, "rb") as f:
            first = f.readline().decode()
        return first == joined_from(sources)
    except (OSError, UnicodeDecodeError):
        return False


def write(path: str, data: bytes, like: str) -> None:
    """Atomically: a reader sees the old pack or the whole new one; any failure leaves no file behind. Its
    mode is the source like's, writable by its owner (as importlib gives a pyc)."""
    tmp = f"{path}.{os.getpid()}"
    try:
        mode = (os.stat(like).st_mode | 0o200) & 0o666
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError:
        return
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
