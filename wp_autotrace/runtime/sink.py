"""The shared JSON-lines log: one os.write per record on an O_APPEND fd.

Every process of a run appends to the same file. O_APPEND makes each write
land at the end as a unit, so records from dozens of processes never
interleave, and no lock is needed (nothing to deadlock a forked child). The
pid, ppid and sequence counter are reset in a forked child by
``Sink.reset_after_fork``.

Two modes (docs/contracts.md, "The log's descriptor"): a sink *holds* a descriptor between writes (the cheap
mode, for processes that record hot calls), or, *released*, holds none: each
record opens the path, checks it is still the log, writes and closes. A
program that lists, counts or closes its own descriptors (CPython's
test_subprocess, daemons' closerange) then never finds the log among them.
A held descriptor sits high (just below min(RLIMIT_NOFILE, 1024)), so it
shifts no number the program's own open() gets.

Safety (docs/security.md): the log is created O_EXCL 0600 by the root and an
existing one is used only if it is this user's own private regular file; every
write first checks that the fd is still that file (a host may close and reuse
descriptors); every record is framed as ``\n{json}\n``, so a fragment left by
a killed or short write ends at the next record's leading newline and never
swallows it.
"""

import _thread
import os
import stat
import sys
import time

from ..common.core import HEADER_KEYS, MAX_RECORD_BYTES, RECORD_START, SCHEMA_VERSION, TRACER_ERROR

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any, Callable

_warned: "set[str]" = set()
# Permission bits that would let another user write (or inject into) the log.
FOREIGN_WRITE_BITS = stat.S_IWGRP | stat.S_IWOTH

# Bound once: a user may trace these very functions (WP_AUTOTRACE_TARGETS=os:getpid),
# and the tracer must not call itself through them.
os_write, os_symlink, os_getpid = os.write, os.symlink, os.getpid  # sink_rare's too
_close, _fstat, _getppid = os.close, os.fstat, os.getppid
_time_ns = time.time_ns  # ts, written `<ns>e-9`: a float's repr (dtoa) cost a tenth of a call (docs/scale.md)
_get_ident = _thread.get_ident
_monotonic, _sleep = time.monotonic, time.sleep
# Sink._seq counts over this: a C iterator, whose next() is atomic under the GIL as itertools.count()'s is, without
# importing itertools at start (docs/scale.md, "Traced call and start-up"); sys.maxsize records.
_SEQ_RANGE = range(sys.maxsize)
_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


# The top-level modules this package's host-side code imports (runtime/, common/, the package's own module, and
# sink_rare.INTERPRETER_MODULES by name; tests/test_activation.py checks every import statement there names one),
# each between spaces: imported_by_tracer walks frames only for one of these. A finder sees every import of the
# host: the walk cost each top-level import ~14K instructions, the test f" {name} " in it ~1.5K (BENCHMARKS.md).
# One string: a set of these names cost every start ~31K to make (its names hashed, or interned as unmarshalled).
TRACER_IMPORTS = (" __future__ _interpreters _json _posixsubprocess _signal _thread _weakrefset _xxsubinterpreters"
                  " atexit builtins collections concurrent copy errno fcntl functools hashlib importlib itertools json"
                  " logging marshal operator os psutil resource select stat subprocess sys threading time types typing"
                  " urllib ")
_getframe = sys._getframe  # bound once: a user may trace sys._getframe (WP_AUTOTRACE_TARGETS=sys:_getframe)


def imported_by_tracer(name: str, depth: int) -> bool:
    """Whether the import of the top-level module name that a finder serves is a statement in this package's code:
    its finders then look the module up where the cwd cannot shadow it. Only a name in TRACER_IMPORTS can be (one C
    test, first); then the first frame outside importlib's, from the finder's caller up (depth: counted from here,
    the finder's own frame 1), runs this package's code."""
    if f" {name} " not in TRACER_IMPORTS:
        return False
    frame: Any = _getframe(depth)
    while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename.startswith(_OWN_DIR)


def identity_of(fd: int) -> "tuple[int, int] | None":
    """(st_dev, st_ino) of what fd refers to now, or None if it is closed."""
    try:
        st = _fstat(fd)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


# The stream fd 2 was when tracing started: warnings are printed only while fd 2
# is still that stream (a host started with 2>&- may have reused fd 2 for a file).
_stderr_identity = identity_of(2)
# Where warnings go when fd 2 is not ours to write: set by the process's Sink.
_warning_sink: "Sink | None" = None
_RARE = __name__ + "_rare"


def rare() -> "Any":
    """runtime/sink_rare.py, the sink's rare paths (warnings, a short write, the exit with no descriptor free):
    made at its first need from the start pack's bytes (the package's later(): no import statement, lock or file, so a
    forked child or an exit with no descriptor free may call it), or loaded with this module where it did not
    come from the pack (the end of this module)."""
    return sys.modules.get(_RARE) or sys.modules[_PACKAGE].later(_RARE)


def warn(message: str, key: "str | None" = None) -> None:
    """One ``wp-autotrace: ...`` line on stderr at most once per key, in the root only; else a tracer_error
    record (sink_rare.warn). Never raises (nor where sink_rare cannot be made: no memory)."""
    try:
        rare().warn(message, key)
    except Exception:
        pass


def check_log_file(st: "os.stat_result", path: str) -> None:
    """Raise unless st is a private regular file of this user with one link."""
    if not stat.S_ISREG(st.st_mode):
        raise OSError(f"{path} is not a regular file")
    if st.st_uid != os.geteuid():
        raise OSError(f"{path} belongs to uid {st.st_uid}, not to this user")
    if st.st_nlink != 1:
        raise OSError(f"{path} has {st.st_nlink} hard links")
    if st.st_mode & FOREIGN_WRITE_BITS:
        raise OSError(f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})")


def open_log(path: str, create: bool = True) -> "tuple[int, tuple[int, int]]":
    """Open the log for appending, never via a symlink; create it (0600, O_EXCL) if asked: its descriptor and
    identity (st_dev, st_ino), from the one fstat its check reads (a second fstat cost every open ~2.5K).

    An existing file is used only if check_log_file accepts it.
    """
    # O_NONBLOCK: opening a FIFO for writing would otherwise wait for a reader
    # (it has no effect on regular files).
    flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags | (os.O_CREAT | os.O_EXCL if create else 0), 0o600)
    except FileExistsError:
        fd = os.open(path, flags)
    try:
        st = _fstat(fd)
        check_log_file(st, path)
        if fd < 3:
            # stdio was closed: the program's own writes to fd 1/2 must not land in the log.
            import fcntl

            low, fd = fd, fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
            os.close(low)
    except BaseException:
        os.close(fd)
        raise
    return fd, (st.st_dev, st.st_ino)


_INF = float("inf")


# encode_basestring_ascii's escapes: these, then \\uXXXX (lower-case hex; a surrogate pair above U+FFFF)
# for every other character outside printable ASCII.
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def _escaped(text: str) -> str:
    """text as a JSON string, as encode_basestring_ascii writes it (a string with a character to escape)."""
    out = []
    for c in text:
        if c in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[c])
        elif " " <= c <= "~":
            out.append(c)
        else:
            n = ord(c)
            if n > 0xFFFF:
                n -= 0x10000
                out.append(f"\\u{0xD800 | (n >> 10):04x}\\u{0xDC00 | (n & 0x3FF):04x}")
            else:
                out.append(f"\\u{n:04x}")
    return '"' + "".join(out) + '"'


def _encode_json(value: "Any") -> str:
    """What jsonline.c_encoder() gives for value, exactly: plain values (exact str, int, float, bool, None,
    and lists, tuples and str-keyed dicts of them) written here, the rest by the C encoder (which the
    tracer's own records never need: an exit imports nothing). No generator: a frame's dict cost half again."""
    kind = type(value)
    if kind is str:
        if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
            return f'"{value}"'
        return _escaped(value)
    elif kind is int or kind is float and -_INF < value < _INF:
        return f"{value}"  # an exact int's or float's str is its repr, which the C encoder writes
    elif value is None:
        return "null"
    elif kind is bool:
        return "true" if value else "false"
    elif kind is list or kind is tuple:
        parts = []  # loops, not comprehensions: each is a code object every start unmarshals, and a function a call
        for v in value:
            parts.append(_encode_json(v))
        return "[" + ",".join(parts) + "]"
    elif kind is dict:
        parts = []
        for k, v in value.items():
            if type(k) is not str:  # a key of another type: the C encoder's
                break
            # A key that is an ASCII identifier (every name the tracer writes) is its own JSON text: no call for it.
            parts.append(f'"{k}":{_encode_json(v)}' if k.isascii() and k.isidentifier()
                         else f"{_encode_json(k)}:{_encode_json(v)}")
        else:
            return "{" + ",".join(parts) + "}"
    from .jsonline import c_encoder  # another type (the tracer's own records hold none at exit)

    return str(c_encoder()(value))


encode_json = _encode_json  # exact for any value; the recorder binds jsonline.c_encoder() for its hot path
# The members every record starts with, in this order (Sink._write).
_HEADER_KEYS = frozenset(HEADER_KEYS)
# encode's bound on a line, with the framing (RECORD_START) written before it.
_MAX_FRAMED = MAX_RECORD_BYTES + len(RECORD_START)
# Event names whose header is kept encoded: the vocabulary is small; a bound all the same.
_MAX_HEADS = 64


def _header_field(name: str) -> "Any":
    """A Sink attribute of the records' header (stored as name): setting it makes the cached header stale."""

    def get(self: "Sink") -> "Any":
        return getattr(self, name)
    def set_(self: "Sink", value: "Any") -> None:
        setattr(self, name, value)
        self._middle = ""

    return property(get, set_)


class Sink:
    """Appends records for this process to the run's log.

    A record is written as one ASCII line whose members come in a fixed order:
    the header (v, event, ts, pid, ppid, host, pidns where set, role, seq), then the fields as
    given. The header's constant parts are encoded once per (event, identity)
    and the fields once, so a record costs one encode of what changes; the
    bytes are exactly those ``frame(encode(record))`` gives for the same record, but for ts, written
    ``<ns>e-9`` (ns / 1e9 where a record is re-encoded whole) (tests/test_sink.py).
    """

    _fast: "Any" = None  # put's three checks as one (set_fast); None until a held descriptor is marked

    def set_fast(self) -> None:
        """_fast again after a set of _mark, active or _closer (each such set calls it; tests/test_sink.py checks
        every one does): the held mark where plain.record_writer's put may take the short way (a mark held,
        active, no exit closing the log), else None. Stored until a read after the store agrees: a set between,
        by another thread or a signal handler, leaves no stale mark. (Not a __setattr__: every attribute set
        would pay a Python call, ~58K instructions for a traced start's Sink.)"""
        while True:
            fast = self._mark if self.active and self._closer is None else None
            self._fast = fast
            if fast is (self._mark if self.active and self._closer is None else None):
                return

    def __init__(self, path: "str | None", host: str, role: str, create: bool = True) -> None:
        global _warning_sink
        self.path = path
        self.identity: tuple[int, int] | None  # (st_dev, st_ino) of the log opened, None: no log
        # The held descriptor, or -1: none held (released, or no log).
        self.fd, self.identity = open_log(path, create) if path else (-1, None)
        self._mark: Any = None  # held.mark's check of the held descriptor, or None: fstat checks it
        self.active = bool(path)  # records are written at all (stop() ends that)
        if path:
            _warning_sink = self
        # The header's identity set as plain attributes: no header is encoded yet (_middle below), and each
        # property setter would cost a start a Python call.
        self._host, self._role, self._pid, self._ppid = host, role, os_getpid(), _getppid()
        self.pidns: int | None = None  # this process's pid namespace, read with the header (_make_middle)
        self.dropped = 0
        # Said to the log: when a write lands after drops, a tracer_error with the count first (opt-in:
        # the watcher says its own drops its own way).
        self.say_drops = False
        self._drops_said = 0
        self._in_flight: set[int] = set()  # descriptors a released write has open right now
        self._seq = iter(_SEQ_RANGE)
        self._closer: int | None = None  # the exiting thread, once close_to_others ran: only it writes
        self._heads: dict[str, str] = {}  # event -> '{"v":1,"event":"E","ts":'
        self._middle = ""  # ',"pid":P,"ppid":Q,"host":"H",("pidns":N,)"role":"R","seq":', "" when stale
        self._open_errno: int | None = None  # why the last open of the log's path failed

    # The header's identity: each change re-encodes it (a stale cache would forge another process's pid).
    role = _header_field("_role")
    pid = _header_field("_pid")
    ppid = _header_field("_ppid")
    host = _header_field("_host")

    def reset_after_fork(self, role: str) -> None:
        """Give a forked child its own identity; a held fd stays valid (shared, O_APPEND).

        A descriptor another thread of the parent had open for one released
        write was copied into the child, where that thread does not exist: it
        is closed here, or the child would hold the log for good.
        """
        self.ppid = self.pid
        self.pid = os_getpid()
        self.role = role
        self.dropped = 0
        self._drops_said = 0
        self._seq = iter(_SEQ_RANGE)
        self._closer = None  # a child forked after its parent's exit began writes as itself
        self.set_fast()
        for fd in list(self._in_flight):
            _close_quietly(fd)
        self._in_flight.clear()

    @property
    def held(self) -> bool:
        """Whether a descriptor is kept between writes."""
        return self.fd >= 0

    def release(self) -> None:
        """Hold no descriptor between writes from now on: each record opens the log, writes, closes."""
        fd, self.fd, self._mark = self.fd, -1, None
        self.set_fast()
        if fd >= 0:
            _close_quietly(fd)

    def stop(self) -> None:
        """Write nothing more (a child about to exec). A held fd is left open: it is close-on-exec."""
        self.active = False
        self.fd, self._mark = -1, None
        self.set_fast()

    def close_to_others(self, wait_s: float) -> None:
        """At exit, in the exiting thread: no other thread writes from now on, and those already
        writing get up to wait_s to land their record; then this thread's record is the last.

        Why: os.write releases the GIL before its syscall. A daemon
        thread that took its seq and released the GIL there may not run again before the
        exiting thread ends the process (exit_group kills it before its write): a record
        numbered but never written, a gap a reader takes for a lost record. Waiting
        here (bounded; sleeping hands the GIL over) lets each such write land. Records a
        thread would begin after this are not written and take no seq: the process has
        ended in the log (its process_exit comes next).
        """
        me = _get_ident()
        self._closer = me
        self.set_fast()
        deadline = _monotonic() + wait_s
        while _monotonic() < deadline and rare().other_thread_writing(me):  # raises only where nothing can be made
            _sleep(EXIT_POLL_S)

    def emit(self, event: str, /, **fields: "Any") -> None:
        """Write one record; never raises. A failed write drops the record."""
        self._write(event, None, fields)

    def emit_encoded(self, event: str, body: str, fields: "Callable[..., dict[str, Any]]", /, *args: "Any") -> None:
        """Write one record whose fields are already encoded: body is their JSON
        members (``"a":1,"b":2``, ASCII, no braces, no header key); fields(*args) gives
        them as a dict for a record over MAX_RECORD_BYTES, which is shrunk. Never raises.
        (A function and its arguments rather than a closure: the hot caller makes none.)"""
        self._write(event, body, fields, args)

    def _write(self, event: str, body: "str | None", fields: "Any", args: "tuple[Any, ...]" = ()) -> None:
        if not self.active or (self._closer is not None and self._closer != _get_ident()):
            return
        fd, opened = self.fd, False
        try:
            # Opened or checked before a seq is taken: both release the GIL, and a
            # daemon thread frozen there at interpreter exit must not leave a seq gap.
            if fd < 0:  # released: a descriptor for this record only
                fd = self._open_same()
                if fd < 0:
                    # The path no longer names the log (moved, removed, replaced), or the program holds
                    # every descriptor it may: the record is lost, as one written through a held fd into a
                    # removed file was; counted, never said on stderr.
                    self.dropped += 1
                    return
                opened = True
                self._in_flight.add(fd)
            else:  # still the log: its description's mark (held.mark), else identity_of(fd) inline
                try:
                    mark = self._mark
                    same = mark is not None and mark[0](fd, mark[1]) == mark[2]
                    if not same:
                        st = _fstat(fd)
                        same = (st.st_dev, st.st_ino) == self.identity
                except OSError:
                    same = False
                if not same:
                    from .held import reopen  # loaded by hold, or now: the rare case opens the log anyway

                    fd = reopen(self)
            ts = _time_ns()
            seq = next(self._seq)
            line = None
            if body is None and _HEADER_KEYS.isdisjoint(fields):  # else a field replaces a header value
                body = _encode_json(fields)[1:-1] if fields else ""
            if body is not None:
                head = self._heads.get(event) or self._head(event)
                middle = self._middle or self._make_middle()
                text = f"\n{head}{ts}e-9{middle}{seq}{',' if body else ''}{body}}}\n"
                if len(text) <= _MAX_FRAMED:
                    line = text.encode()
            if line is None:
                if callable(fields):
                    fields = fields(*args)
                if not self._middle:
                    self._make_middle()  # reads pidns
                record = {"v": SCHEMA_VERSION, "event": event, "ts": ts / 1e9, "pid": self.pid, "ppid": self.ppid,
                          "host": self.host, "pidns": self.pidns, "role": self._role, "seq": seq}
                if self.pidns is None:
                    del record["pidns"]
                record.update(fields)
                from .jsonline import encode, frame  # an oversized record, or a field named as a header's

                line = frame(encode(record))
            written = os_write(fd, line)
            if written != len(line):
                self.lost(OSError(f"short write ({written} of {len(line)} bytes)"), fd)
            # Landed after drops: the count next (never after process_exit, which carries it itself).
            elif self.dropped != self._drops_said and self.say_drops and event != "process_exit":
                try:
                    rare().say_drops(self)
                except Exception:  # sink_rare not made (no memory): the next write that lands says it
                    pass
        except Exception as exc:
            self.lost(exc)
        finally:
            if opened:
                self._in_flight.discard(fd)
                _close_quietly(fd)

    def lost(self, exc: "BaseException", fd: int = -1) -> None:
        """A record lost after its seq was taken: counted, then said once (sink_rare.lost; fd: a short write's,
        whose fragment it ends). Never raises."""
        self.dropped += 1
        try:
            rare().lost(self, exc, fd)
        except Exception:  # sink_rare not made (no memory): counted all the same
            pass

    def _head(self, event: str) -> str:
        head = f'{{"v":{_encode_json(SCHEMA_VERSION)},"event":{_encode_json(event)},"ts":'
        if len(self._heads) < _MAX_HEADS:
            self._heads[event] = head
        return head

    def _make_middle(self) -> str:
        # A pid names a process only within its pid namespace: children of one program in namespaces of their own
        # (`unshare -p`, bwrap, nsjail) are each pid 1 there, and started within one clock tick share a create time
        # too. So the header names the namespace (the inode of /proc/self/ns/pid, "pid:[N]") where it is not the
        # initial one (its inode is fixed, PROC_PID_INIT_INO: a host's records are as before); the watcher reads the
        # same inode of each process it sees by host pid (analysis/fold/pidns.py joins the two). Read here, as the
        # header is made: at the first record, and again in a forked child (its parent may have unshared a
        # namespace first); one readlink, inline (a function costs each traced start ~20K instructions to load).
        try:
            ns = os.readlink("/proc/self/ns/pid")
            self.pidns = None if ns == "pid:[4026531836]" else int(ns[5:-1])
        except (OSError, ValueError):  # no /proc (a chroot): what was read before stands
            pass
        ns = "" if self.pidns is None else f'"pidns":{_encode_json(self.pidns)},'
        self._middle = (f',"pid":{_encode_json(self._pid)},"ppid":{_encode_json(self._ppid)},'
                        f'"host":{_encode_json(self._host)},{ns}"role":{_encode_json(self._role)},"seq":')
        return self._middle

    def _open_same(self) -> int:
        """A new descriptor of the log's path, if it still names the file this process opened; -1 where
        it does not (no file there, a symlink, another file) or no descriptor is free. Raises OSError
        where the file is there but refused."""
        try:
            fd, identity = open_log(str(self.path), create=False)
        except OSError as exc:
            # ELOOP: O_NOFOLLOW met a symlink planted at the path. EMFILE/ENFILE: the program holds
            # every descriptor it may (a record then is lost, as the program's own open() would fail).
            self._open_errno = exc.errno
            if rare().unreachable(exc.errno, self.path):
                return -1
            raise
        if identity != self.identity:
            os.close(fd)
            return -1
        return fd

    def error(self, where: str, exc: "BaseException") -> None:
        """Report a tracer fault: once on stderr, and as a tracer_error record.

        Torch sends sidecar output to /dev/null, so the record is the only
        trace of a fault inside a compile sidecar or worker.
        """
        try:
            ours = rare().stderr_is_ours()
        except Exception:  # sink_rare not made (no memory): the record says it
            ours = False
        if ours:  # otherwise warn would log it a second time
            warn(f"{where}: {type(exc).__name__}: {exc}", where)
        self.emit(TRACER_ERROR, where=where, error=f"{type(exc).__name__}: {exc}")


def _close_quietly(fd: int) -> None:
    try:
        _close(fd)
    except OSError:
        pass


EXIT_POLL_S = 0.001  # close_to_others: how often it looks again (each look hands the GIL over)
WRITER_DEPTH = 6  # frames looked up from a thread's innermost for a writer (encode, _time_ns... are callees)
# The code of each function that takes a seq and writes (Sink._write; plain.record_writer's put adds its own).
writer_codes = {Sink._write.__code__}


# Not made from the pack (load() never ran: the watcher, the command, a plain import of the start modules): loaded
# now, with this module, so a forked child, a signal or an exit with no descriptor free later imports nothing.
_PACKAGE = __package__.partition(".")[0]  # the package: the start modules' loader (its __init__)
if _RARE not in getattr(sys.modules.get(_PACKAGE), "later_code", ()):
    __import__(_RARE)  # binds no name here: the module's names are those it has made from the pack
