"""The sink's rare paths: warnings (and whether this process says the settings' notes), the exit with no
descriptor free, a root's default log name, and the exit's look for other threads' writes (and whether it may
look: no other interpreter).

A plain traced start and exit run none of this. So it is not made at start: runtime/sink.py reaches it through
``rare()``, which makes it from the start pack's bytes at its first need (wp_autotrace/__init__.py ``later``: no
import statement, no module lock, no file), since it runs where an import may hang or fail: in a forked child
(a module lock a vanished parent thread held), at an exit with no descriptor free. Where the start modules were
not made from the pack (the watcher, the command, a plain import), sink.py loads it with itself.

Invariants: functions and constants only; its state (the keys warned, the warning sink, fd 2's first identity)
lives in sink.py, read from there at each call. Every name it imports is of a module loaded before it (sink.py,
common/core.py): an import of a loaded module takes no lock and opens nothing.
"""

import os
import sys

from ..common.core import EXIT_NOTE, TRACER_ERROR
from ..common.env import ROOT_ENV, WARNED_ENV, set_vars
from .sink import WRITER_DEPTH, encode_json, identity_of, os_getpid, os_symlink, os_write, writer_codes

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any

    from .sink import Sink

# The sink module's state (_warned, _warning_sink, _stderr_identity) is read at each call: it changes.
_sink = sys.modules[__package__ + ".sink"]


def lost(sink: "Sink", exc: "BaseException", fd: int) -> None:
    """Sink.lost's rest, once the record is counted: a short write's fragment ended (fd), the loss said once."""
    if fd >= 0:
        try:  # a newline ends the fragment (best effort): the next record's own leading newline then starts clean
            os_write(fd, b"\n")
        except OSError:
            pass
    if isinstance(exc, PermissionError) and unreachable(exc.errno, sink.path):
        return  # it changed its user (held.reopen): counted, and the watcher's root_change says why
    warn(f"cannot write the log {sink.path}: {exc}; records are being dropped", "write")


def say_drops(sink: "Sink") -> None:
    """The count of records lost so far, once the log takes records again (a full disk freed): the process's own
    word on them, even if its process_exit is lost later (the reader then infers no kill). If this record is lost
    too, the next write that lands says the count again (Sink._write)."""
    sink._drops_said = sink.dropped
    sink._write("tracer_error", None, {"where": "log", "dropped": sink.dropped,
                                        "error": f"{sink.dropped} record(s) could not be written "
                                                 "(the log's disk full or unwritable)"})


def unreachable(code: "int | None", path: "str | None" = None) -> bool:
    """Why a released write may find no log to open, said nowhere (counted): the path no longer names it,
    or no descriptor is free, or the log refuses this process because it is no longer the user the log is
    private to (it changed its user in-process: setuid; the watcher's root_change says so, the host's stderr
    nothing). errno is imported here, on that rare path only: a built-in module, it loads with no file to
    open (a program may have no descriptor free)."""
    import errno

    if code in (errno.EACCES, errno.EPERM) and path:
        try:
            return os.stat(path).st_uid != os.geteuid()
        except OSError:
            return True  # its folder refuses it too: the same change of user
    return code in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EMFILE, errno.ENFILE)


def is_root_process() -> bool:
    """Whether this is the run's root, the process the user started (or no run is set up yet).

    Read from the environment at each call (warnings are rare): a descendant,
    forked or started, inherits the root's WP_AUTOTRACE_ROOT_PID.
    """
    root = os.environ.get(ROOT_ENV)
    return not root or root == str(os_getpid())


def says_settings_notes() -> bool:
    """Whether this process says the settings' notes (bootstrap._say_notes): it starts a run (no run's root among
    its ancestors) and no process that already warned about these settings is among them."""
    pid = str(os_getpid())
    found = set_vars((ROOT_ENV, WARNED_ENV))
    root_pid, warned = found.get(ROOT_ENV), found.get(WARNED_ENV)
    return (not root_pid or root_pid == pid) and (not warned or warned == pid)


def stderr_is_ours() -> bool:
    """Whether this process may write on fd 2: it is the root, and fd 2 is still its original stream.

    A descendant never writes on its stderr: a host may capture a child's
    stderr (and parse it), so its faults go to the log or nowhere.
    """
    first = _sink._stderr_identity
    return first is not None and identity_of(2) == first and is_root_process()


def warn(message: str, key: "str | None" = None) -> None:
    """Print one ``wp-autotrace: ...`` line on stderr, at most once per key.

    Only the root prints, and only while fd 2 is the stream it started with;
    otherwise the warning goes only into the log, as a tracer_error record
    (or nowhere, when there is no log to write).
    """
    key = key or message
    if key in _sink._warned:
        return
    _sink._warned.add(key)
    if not stderr_is_ours():
        sink = _sink._warning_sink
        if sink is not None:
            sink.emit(TRACER_ERROR, where="warning", error=message)
        return
    try:
        os_write(2, f"wp-autotrace: {one_line(message)}\n".encode("utf-8", "backslashreplace"))
    except OSError:
        pass


def one_line(text: str) -> str:
    """text with every character str.isprintable() refuses (newline, ESC, U+202E and the other
    bidi controls, a path's undecodable bytes) escaped as Python writes it (\\n, \\x1b, \\u202e):
    a path or error text can neither break the one warning line nor restyle or reorder the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def default_log_name(host: str, pid: int) -> str:
    """The default log file name: a random part, so another user cannot pre-create it."""
    return f"wp_autotrace-{host}-{pid}-{os.urandom(4).hex()}.jsonl"


def one_more_descriptor(sink: "Sink") -> "tuple[int, int] | None":
    """Where the sink's last open of the log found no descriptor free (EMFILE: a program ending with its
    table full), the soft RLIMIT_NOFILE raised by one, for the exit record's one write: the limits to put
    back (put_back_limit), or None where the hard limit leaves no room or ``resource`` is not loaded (by
    the root at start, or by a sink that held its descriptor). Imports nothing: an exit may have no
    descriptor to load a module with; errno is built in."""
    import errno

    resource: Any = _resource()
    if sink._open_errno != errno.EMFILE or resource is None:
        return None
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY or (hard != resource.RLIM_INFINITY and soft >= hard):
            return None
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft + 1, hard))
    except (OSError, ValueError):
        return None
    return soft, hard


def leave_exit_note(sink: "Sink", fields: "dict[str, Any]") -> None:
    """Where the exit record found no descriptor (EMFILE, soft RLIMIT_NOFILE at the hard one), what it would have
    said as a note the watcher reads when it sees this process end: a symlink (it needs no descriptor) beside
    the log, LOG + EXIT_NOTE + pid, its target the fields' JSON; so the log says the record was lost, never a
    kill. A stale note of ours under that name is replaced. Imports nothing, never raises."""
    import errno

    if sink._open_errno != errno.EMFILE or not sink.active:
        return
    path, note = f"{sink.path}{EXIT_NOTE}{os_getpid()}", encode_json(fields)
    try:
        for _ in range(2):
            try:
                os_symlink(note, path)
                return
            except FileExistsError:
                if os.lstat(path).st_uid != os.geteuid():
                    return
                os.unlink(path)
    except Exception:
        pass


def _resource() -> "Any":
    """The resource module the tracer imported itself (root's, or held's with a sink that held its descriptor),
    else the host's: the root takes its name out of sys.modules after its start (root.unshadow), and a name the
    host imports may be its own file of that name."""
    for owner in ("root", "held"):
        found = getattr(sys.modules.get(f"{__package__}.{owner}"), "resource", None)
        if found is not None:
            return found
    return sys.modules.get("resource")


def put_back_limit(limits: "tuple[int, int]") -> None:
    """Put back the RLIMIT_NOFILE one_more_descriptor raised."""
    try:
        resource: Any = _resource()
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)
    except (OSError, ValueError):
        pass


def other_thread_writing(me: int) -> bool:
    """Whether a thread other than me is inside a writer (writer_codes: seq taken or about to be, not written)."""
    for ident, frame in sys._current_frames().items():
        depth = 0
        while ident != me and frame is not None and depth < WRITER_DEPTH:
            if frame.f_code in writer_codes:
                return True
            frame, depth = frame.f_back, depth + 1  # type: ignore[assignment]
    return False


INTERPRETER_MODULES = ("_interpreters", "_xxsubinterpreters")  # 3.13+, 3.12 (first_target.prepare_exit loads one)


def no_other_interpreter() -> bool:
    """Whether Sink.close_to_others may look at other threads' frames (sys._current_frames()).

    From 3.12 sys._current_frames() walks the threads of every interpreter of the process and
    makes a frame object, from the caller's interpreter's allocator, for each one's running frame;
    a subinterpreter has its own GIL and allocator, runs on meanwhile, and later frees that
    object with its own allocator (3.13: "free(): invalid pointer"). So the look is
    skipped while another interpreter exists, or when that cannot be told. 3.9-3.11: one GIL and
    one allocator for every interpreter: always safe. Nothing is imported here (an exit may find
    no descriptor free to load a module): the interpreters module is the one the program loaded,
    or the one first_target.probes() loaded for a process that records calls (first_target.prepare_exit).
    """
    if sys.version_info < (3, 12):
        return True
    for name in INTERPRETER_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            try:
                return len(module.list_all()) <= 1
            except Exception:
                return False
    return False
