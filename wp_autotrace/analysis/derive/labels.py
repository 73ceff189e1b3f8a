"""Process labels: what a process runs, in a few words, from its command line alone.

Pure functions, no I/O: the report calls them on recorded argv and on the
watcher's names and command lines. A traced Python child is named by its
script, ``-m module`` or ``-c`` code (with the multiprocessing and torch
helpers it is known to start recognised); anything else by its program name.
Compiler toolchain processes (gcc, cc1plus, ld, nvcc, ...) are recognised so
the report can fold them into one line per parent.
"""

from __future__ import annotations

from ...common.cmdline import basename, first_line, python_command

# Their home is targets.py, next to RANK_ENV (the watcher reads ranks too); re-exported here.
from ...common.targets import RANK_KEYS as RANK_KEYS
from ...common.targets import rank_value as rank_value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..fold.model import Process

# Helpers started with `python -c CODE`, recognised by a piece of CODE; first match wins.
KNOWN_CODE: tuple[tuple[str, str], ...] = (
    ("multiprocessing.spawn", "multiprocessing spawn child"),
    ("multiprocessing.forkserver", "multiprocessing forkserver"),
    ("multiprocessing.resource_tracker", "multiprocessing resource_tracker"),
    ("multiprocessing.semaphore_tracker", "multiprocessing resource_tracker"),
    # execnet's popen bootstrap (gateway_io.popen_bootstrapline): a pytest-xdist worker.
    ("exec(eval(sys.stdin.readline()))", "pytest-xdist worker (execnet)"),
    # torch._inductor.cpu_vec_isa's dlopen probe of a test .so (one per ISA check).
    ("LoadLibrary", "torch ISA probe (python -c ...LoadLibrary...)"),
)
# Short-lived helpers a process starts by the dozen (one per ISA check): the default Process tree folds them
# into one line per parent, as it does the compiler toolchain.
SHORT_HELPERS = frozenset(("torch ISA probe (python -c ...LoadLibrary...)",))
# Modules run with -m that are better known by another name.
KNOWN_MODULES = {
    "torch.distributed.run": "torchrun",
    "torch.distributed.launch": "torch.distributed.launch",
    "torch._vendor.quack._compile_worker": "quack compile worker",
}
# Scripts run by path, recognised by their path's end.
KNOWN_SCRIPTS: tuple[tuple[str, str], ...] = (
    ("_inductor/compile_worker/__main__.py", "compile sidecar"),
    ("_inductor/__autotune_main__.py", "autotune worker"),
)

# The kernel keeps this many characters of a process name (TASK_COMM_LEN - 1): a
# name this long may be cut, so the command line is consulted too.
COMM_LEN = 15
# Compiler toolchain programs (as their process name, /proc/PID/comm, shows them).
TOOLCHAIN = frozenset({
    # C/C++ drivers and their passes
    "cc", "c++", "gcc", "g++", "cpp", "clang", "clang++", "cc1", "cc1plus", "cc1obj", "collect2", "lto1",
    "lto-wrapper", "icx", "icpx", "icc", "icpc",
    # assemblers, linkers, archivers
    "as", "ld", "ld.bfd", "ld.gold", "ld.lld", "lld", "mold", "ar", "ranlib", "strip", "objcopy",
    # CUDA / ROCm / Triton
    "nvcc", "ptxas", "cicc", "cudafe++", "fatbinary", "nvlink", "nvdisasm", "cuobjdump", "hipcc",
    "ccache", "sccache",
})


def label_for(argv: Sequence[str]) -> str:
    """A short label for a process from its full command line (interpreter first)."""
    if not argv:
        return "?"
    command = python_command(argv)
    if command is None:
        return basename(argv[0]) or "?"
    kind, value = command
    if kind == "-m":
        return KNOWN_MODULES.get(value, f"-m {value}")
    if kind == "-c":
        for piece, label in KNOWN_CODE:
            if piece in value:
                return label
        return f"-c {first_line(value)}"
    if kind == "script":
        path = value.replace("\\", "/")
        for end, label in KNOWN_SCRIPTS:
            if path.endswith(end):
                return label
        name = basename(path)
        if name == "__main__.py" and "/" in path:
            return "/".join(path.split("/")[-2:])  # a package run by path: name the package
        return name
    return "python (stdin)" if kind == "stdin" else "python"


def tool_name(name: str, cmd: Sequence[str] | str = ()) -> str | None:
    """The toolchain program a process is (by its comm name first), or None.

    The comm name decides: gcc execs collect2 with argv[0] still reading like
    the driver in some tree views, and comm is what the kernel says it runs.
    Versioned and cross names count (gcc-12, x86_64-linux-gnu-g++, clang-17).
    """
    for candidate in (name, _first_word(cmd)):
        tool = _tool(basename(candidate or ""))
        if tool is not None:
            return tool
        if candidate and len(candidate) < COMM_LEN:
            return None  # the comm name is known, whole, and is something else
    return None


def _first_word(cmd: Sequence[str] | str) -> str:
    if isinstance(cmd, str):
        return cmd.split(" ", 1)[0]
    return cmd[0] if cmd else ""


def _tool(base: str) -> str | None:
    if base in TOOLCHAIN:
        return base
    # Drop a version suffix (gcc-12, clang-17.0), then a target triple prefix (x86_64-linux-gnu-gcc).
    head, _, tail = base.rpartition("-")
    if head and tail.replace(".", "").isdigit():
        base = head
        if base in TOOLCHAIN:
            return base
    last = base.rsplit("-", 1)[-1]
    return last if last != base and last in TOOLCHAIN and base.count("-") >= 2 else None


def cmd_argv(cmd: str) -> list[str]:
    """An argv from the watcher's command line (its arguments joined by spaces): split at spaces, but a Python
    `-c` code, which has spaces of its own, kept whole from there to the end (an untraced ISA probe's
    `python -c import ctypes; ...LoadLibrary...` is then known by its code, not '-c import')."""
    parts = cmd.split()
    kind = python_command(parts)
    if kind is not None and kind[0] == "-c" and "-c" in parts[1:]:  # not a script's own -c argument
        i = parts.index("-c", 1)
        return parts[:i + 1] + [" ".join(parts[i + 1:])] if i + 1 < len(parts) else parts
    return parts


def process_label(p: Process) -> str:
    """What a process runs, in a few words: its script/module/code (label_for), or its real name (a tool's)."""
    tool = None if p.traced else tool_name(p.name, p.cmd)
    if tool is not None:
        return tool
    argv = p.argv or cmd_argv(p.cmd)
    if argv and (p.traced or python_command(argv) is not None):
        return label_for(argv)
    return p.name or (label_for(argv) if argv else "?")
