"""The start pack's writer: imported by the loader (wp_autotrace/__init__.py load()) only where a start found no
current pack and may write bytecode, which is a start after an install or an edit: every other traced start loaded
this code with the package and never ran it (~24K instructions each; BENCHMARKS.md). A start under -B or
PYTHONDONTWRITEBYTECODE writes no pack and never imports it. The pack's layout is the loader's: this writes the
bytes it is given, atomically, and tells whether the joined start module (tools/join_start.py's) was made from
the sources beside it. The loader takes this module out of sys.modules again after the write, so a start that
wrote its pack leaves the modules one that read it does.
"""

import os

# The joined module's first line: its sources' sizes and CRC-32s, in the join's order, when it was made
_JOINED_FROM = "# joined from:"


def joined_from(sources: "list[str]") -> str:
    """The joined module's first line for these source files as they are now (the tool writes it)."""
    import zlib  # here only: a start that writes no pack never needs it

    parts = []
    for path in sources:
        with open(path, "rb") as f:
            data = f.read()
        parts.append(f"{len(data)}:{zlib.crc32(data):08x}")
    return f"{_JOINED_FROM} {' '.join(parts)}\n"


def is_joined_from(joined: str, sources: "list[str]") -> bool:
    """Whether the joined module at path joined was made from these sources as they are now (a source edited since,
    or no joined module: its code is not theirs, and the pack holds theirs). Never raises."""
    try:
        with open(joined, "rb") as f:
            first = f.readline().decode()
        return first == joined_from(sources)
    except (OSError, UnicodeDecodeError, ImportError):
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
