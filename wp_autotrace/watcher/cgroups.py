"""The cgroups of the run's processes and the limits they are held to, read by the watcher as each process joins.

Memory: the kernel charges a cgroup for every page its processes use (page cache too); its OOM killer ends one of
them when a charge would pass the least limit set on that cgroup or on one above it (what slurmstepd and docker
set): v2's memory.max ("max": none), v1's memory.limit_in_bytes (none reads as PAGE_COUNTER_MAX pages,
9223372036854771712 on 4 KiB pages). Pids: the pids controller counts every task (each process and each thread,
root's too) against pids.max (podman's and docker's --pids-limit, a pod's pid limit, systemd's TasksMax); a fork
or a thread start past it fails with EAGAIN, and the kernel counts each refusal in pids.events ("max N"): in v1 in
the forking task's cgroup; in v2 before Linux 6.13 there too, from 6.13 in the cgroup whose limit refused it and
those above it (unless cgroup2 is mounted with pids_localevents: the forking task's again). So in v2 the count is
read at both, the limit's cgroup and the process's own where they differ (`refused`, `refused_own`), and a rise in
either is a refusal (the larger rise: 6.13+ may count in both). That count is read as the cgroup is first
seen, once more as the watcher first reads a pool job's error of the run (the failure's cause can only be in a count
read by then), and at the watcher's end (again()): never per tick; so is a memory limit's cgroup's peak charge
(v1 memory.max_usage_in_bytes, v2 memory.peak). CPU: a CFS quota (docker's --cpus, a pod's limits.cpu) lets a
cgroup's tasks run QUOTA us of CPU time per PERIOD us (v1 cpu.cfs_quota_us, -1: none, with cpu.cfs_period_us; v2
cpu.max "QUOTA PERIOD", "max": none), the least ratio on the cgroup or above it; once spent, the kernel stops them
until the next period and counts it in the quota's cgroup's cpu.stat (nr_periods, nr_throttled, and the time:
v1 throttled_time ns, v2 throttled_usec), read at the join and at the end like the pids count. Nothing is read in
the traced process.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from ..common.procfs import read_small

CGROUP_ROOT = "/sys/fs/cgroup"
READ_BYTES = 4096  # /proc/PID/cgroup is a line per hierarchy (about 400 bytes on a v1 host)
NO_LIMIT_FROM = 1 << 60  # v1's "none" and anything near it: no host has an exbibyte
MAX_DEPTH = 32  # cgroup levels walked up at most (slurm's is 4: /slurm/uid_U/job_J/step_S)
MAX_CGROUPS = 64  # distinct cgroups read per run: a run whose processes each have their own stops being read there
# controller -> (its tree entry field and record, its v1 limit file, its v2 limit file)
MEMORY_KIND = ("memory", "memcg", "memory.limit_in_bytes", "memory.max")
PIDS_KIND = ("pids", "pidcg", "pids.max", "pids.max")
CPU_KIND = ("cpu", "cpucg", "cpu.cfs_quota_us", "cpu.max")
CPU_PERIOD_V1 = "cpu.cfs_period_us"
CPU_STAT = "cpu.stat"
PIDS_EVENTS = "pids.events"
USE_HIERARCHY = "memory.use_hierarchy"  # v1: 0 where a cgroup's children are not charged to it
MOUNTINFO_BYTES = 1 << 20  # /proc/self/mountinfo read at most (a container host's can hold thousands of mounts)


def cgroup_file(pid: int, proc: str = "/proc") -> bytes | None:
    """A live process's /proc/PID/cgroup; None unread (gone)."""
    return read_small(f"{proc}/{pid}/cgroup", READ_BYTES)


def parse_cgroup(data: bytes | None, controller: str = MEMORY_KIND[0]) -> tuple[int, str] | None:
    """(1, path) from a /proc/PID/cgroup's v1 line of that controller, else (2, path) from its v2 line ("0::path");
    None where it has neither or the path lies outside the reader's cgroup namespace ("/.." first)."""
    found = None
    for line in (data or b"").split(b"\n"):
        parts = line.split(b":", 2)
        if len(parts) != 3 or not parts[2].startswith(b"/") or parts[2].startswith(b"/.."):
            continue
        path = parts[2].decode(errors="replace")
        if controller.encode() in parts[1].split(b","):
            return 1, path
        if parts[0] == b"0" and not parts[1]:
            found = (2, path)
    return found


def _limit_in(data: bytes | None) -> tuple[bool, int | None]:
    """(read, limit) of a limit file: its number, or None for "max" or v1's none."""
    text = (data or b"").strip()
    if text == b"max":
        return True, None
    if not text.isdigit():
        return False, None
    return True, int(text) if int(text) < NO_LIMIT_FROM else None


def _cpu_in(place: str, name: str) -> tuple[bool, tuple[float, int, int] | None]:
    """(read, (CPUs, quota us, period us)) of a cgroup directory's CFS quota (v1 cpu.cfs_quota_us with
    cpu.cfs_period_us, v2 cpu.max); None for none ("max", v1's -1)."""
    text = (read_small(os.path.join(place, name), READ_BYTES) or b"").split()
    if name == CPU_KIND[2] and len(text) == 1:
        text.append((read_small(os.path.join(place, CPU_PERIOD_V1), READ_BYTES) or b"").strip())
    if len(text) != 2 or not text[1].isdigit() or int(text[1]) <= 0:
        return False, None
    if text[0] in (b"max", b"-1"):
        return True, None
    if not text[0].isdigit():
        return False, None
    quota, period = int(text[0]), int(text[1])
    return True, (quota / period, quota, period)


def _read_limit(kind: tuple[str, str, str, str], place: str,
                name: str) -> tuple[bool, float | None, dict[str, object]]:
    """(read, the limit as a number to compare, the record's fields of it) of one cgroup directory's limit file."""
    if kind[0] == CPU_KIND[0]:
        ok, quota = _cpu_in(place, name)
        if quota is None:
            return ok, None, {}
        return ok, quota[0], {"limit": round(quota[0], 4), "quota_us": quota[1], "period_us": quota[2]}
    ok, limit = _limit_in(read_small(os.path.join(place, name), READ_BYTES))
    return ok, limit, {"limit": limit}


def _bases(version: int, root: str, controller: str) -> tuple[str, ...]:
    return (os.path.join(root, controller),) if version == 1 else (root, os.path.join(root, "unified"))


def cgroup_mounts(proc: str = "/proc") -> dict[str, str]:
    """Mount point -> the cgroup it shows as its root, of each cgroup (v1) and cgroup2 mount in /proc/self/mountinfo
    (field 4: "/" as a rule; a docker container without a cgroup namespace on v1 mounts its own cgroup,
    /docker/ID, there, while /proc/PID/cgroup names it by its whole path). {} unread."""
    out = {}
    for line in (read_small(f"{proc}/self/mountinfo", MOUNTINFO_BYTES) or b"").split(b"\n"):
        fields = line.split(b" ")
        if b"-" not in fields[6:] or len(fields) < 5:
            continue
        kind = fields[fields.index(b"-", 6) + 1:][:1]
        if kind in ([b"cgroup"], [b"cgroup2"]):
            root, point = (_unescape(f) for f in fields[3:5])
            out[point] = root
    return out


def _unescape(field: bytes) -> str:
    """A mountinfo path: the kernel writes space, tab, newline and backslash as octal escapes (\\040 ...)."""
    parts = field.split(b"\\")
    out = parts[0]
    for part in parts[1:]:
        code = part[:3]
        octal = len(code) == 3 and all(c in b"01234567" for c in code)
        out += bytes([int(code, 8)]) + part[3:] if octal else b"\\" + part
    return out.decode(errors="replace")


def _top(mounts: dict[str, str] | None, base: str) -> str:
    """The cgroup a controller's mount shows as its root (cgroup_mounts), "/" where unknown. v1 hosts co-mount
    controllers (systemd: /sys/fs/cgroup/cpu,cpuacct, with /sys/fs/cgroup/cpu a symlink to it): mountinfo names the
    mount point, so a path that is a link is looked up by what it points to."""
    if not mounts:
        return "/"
    top = mounts.get(base)
    return top if top is not None else mounts.get(os.path.realpath(base), "/")


def _place(base: str, top: str, at: str) -> str | None:
    """The directory of cgroup `at` under a mount at base that shows cgroup `top` as its root; None where `at` is
    not under it (not visible there)."""
    if top != "/" and at != top and not at.startswith(top.rstrip("/") + "/"):
        return None
    return os.path.join(base, at[len(top) if top != "/" else 0:].lstrip("/"))


def _applies_above(version: int, kind: tuple[str, str, str, str], base: str, top: str, parent: str) -> bool:
    """Whether a limit on parent (and above it) holds its children: always, but in v1's memory controller under a
    parent with memory.use_hierarchy 0 (RHEL 7's kernels and older: its children are not charged to it)."""
    if version != 1 or kind[0] != MEMORY_KIND[0]:
        return True
    place = _place(base, top, parent)
    flag = read_small(os.path.join(place, USE_HIERARCHY), READ_BYTES) if place is not None else None
    return (flag or b"").strip() != b"0"


def least_limit(version: int, path: str, root: str = CGROUP_ROOT, kind: tuple[str, str, str, str] = MEMORY_KIND,
                mounts: dict[str, str] | None = None) -> dict[str, object] | None:
    """A memcg / pidcg / cpucg record's fields for a cgroup: `version`, `path`, `file` (the limit's file name),
    `limit` (the least set on it or above, up to the mount's root (cgroup_mounts) and, in v1's memory controller, up
    to a parent whose use_hierarchy is 0; absent where none is; a CPU quota's in CPUs, with `quota_us` and
    `period_us`) and `limit_path` (the cgroup that sets it, where that is one above). None where no limit file of it
    or above could be read (no such controller mounted there, or the cgroup not under the mount's root: unknown)."""
    name = kind[2] if version == 1 else kind[3]
    for base in _bases(version, root, kind[0]):
        top = _top(mounts, base)
        read, least, at, here = False, None, "", path
        fields: dict[str, object] = {}  # the least one's: `limit` (bytes, tasks, CPUs), a quota's figures
        for _ in range(MAX_DEPTH):
            place = _place(base, top, here)
            if place is None:
                break
            ok, limit, got = _read_limit(kind, place, name)
            read = read or ok
            if limit is not None and (least is None or limit < least):
                least, at, fields = limit, here, got
            parent = os.path.dirname(here.rstrip("/")) or "/"
            if here in ("/", top) or not _applies_above(version, kind, base, top, parent):
                break
            here = parent
        if read:
            out: dict[str, object] = {"version": version, "path": path, "file": name}
            if least is not None:
                out.update(fields)
                if at != path:
                    out["limit_path"] = at
            return out
    return None


def memory_limit(version: int, path: str, root: str = CGROUP_ROOT) -> dict[str, object] | None:
    """least_limit of a memory cgroup."""
    return least_limit(version, path, root, MEMORY_KIND)


def _texts(version: int, root: str, controller: str, at: str, name: str,
           mounts: dict[str, str] | None) -> Iterator[bytes]:
    """File `name` of cgroup `at` under each mount the controller may be at (_bases), in order, b"" where unread
    there: a reader takes the first it can parse."""
    for base in _bases(version, root, controller):
        place = _place(base, _top(mounts, base), at)
        yield (read_small(os.path.join(place, name), READ_BYTES) if place else None) or b""


def _max_events(version: int, at: str, root: str, mounts: dict[str, str] | None) -> int | None:
    """pids.events' "max N" of cgroup `at`; None unread."""
    for text in _texts(version, root, PIDS_KIND[0], at, PIDS_EVENTS, mounts):
        for line in text.split(b"\n"):
            key, _, value = line.partition(b" ")
            if key == b"max" and value.strip().isdigit():
                return int(value)
    return None


def refused(fields: dict[str, object], root: str = CGROUP_ROOT,
            mounts: dict[str, str] | None = None) -> dict[str, int]:
    """The kernel's counts of forks and thread starts a pids limit refused (pids.events "max N"), read where it
    counts them (module docstring): `refused` in v1 at the process's own cgroup, in v2 at the limit's; and in v2,
    where the limit is set above the process's own cgroup, `refused_own` there too (one more small read). The
    counts read, {} none."""
    version, path = int(str(fields["version"])), str(fields["path"])
    at = path if version == 1 else str(fields.get("limit_path", path))
    wanted = {"refused": at, **({"refused_own": path} if at != path else {})}
    counts = {key: _max_events(version, cgroup, root, mounts) for key, cgroup in wanted.items()}
    return {key: count for key, count in counts.items() if count is not None}


def peak(fields: dict[str, object], root: str = CGROUP_ROOT,
         mounts: dict[str, str] | None = None) -> dict[str, int]:
    """`peak`: the most the kernel has charged the cgroup whose memory limit it is, bytes (v1
    memory.max_usage_in_bytes, v2 memory.peak: Linux 5.19+), over that cgroup's life so far. {} unread."""
    version, at = int(str(fields["version"])), str(fields.get("limit_path", fields["path"]))
    name = "memory.max_usage_in_bytes" if version == 1 else "memory.peak"
    for text in _texts(version, root, MEMORY_KIND[0], at, name, mounts):
        text = text.strip()
        if text.isdigit():
            return {"peak": int(text)}
    return {}


def throttled(fields: dict[str, object], root: str = CGROUP_ROOT,
              mounts: dict[str, str] | None = None) -> dict[str, int]:
    """The kernel's counts of a CPU quota's periods, since the quota's cgroup was made: `periods` (nr_periods: those
    its tasks ran in), `throttled` (nr_throttled: those they spent the quota in and were stopped), `throttled_us` (the
    time they stood stopped, summed over the CPUs; v1's throttled_time is ns), from cpu.stat of the cgroup that sets
    the quota (each cgroup counts its own quota's). {} unread."""
    version, at = int(str(fields["version"])), str(fields.get("limit_path", fields["path"]))
    for text in _texts(version, root, CPU_KIND[0], at, CPU_STAT, mounts):
        got = {f[0]: int(f[1]) for f in (line.split() for line in text.split(b"\n")) if len(f) == 2 and f[1].isdigit()}
        us = got.get(b"throttled_usec", got[b"throttled_time"] // 1000 if b"throttled_time" in got else None)
        if b"nr_periods" in got and b"nr_throttled" in got and us is not None:
            return {"periods": got[b"nr_periods"], "throttled": got[b"nr_throttled"], "throttled_us": us}
    return {}


# controller -> the record's fields for the kernel's counts read at the join and again later, and their reader
COUNTS = {PIDS_KIND[0]: (("refused", "refused_own"), refused), MEMORY_KIND[0]: (("peak",), peak),
          CPU_KIND[0]: (("periods", "throttled", "throttled_us"), throttled)}


class Cgroups:
    """The cgroups of one controller the run's processes are in: each process's path, read as it joins, and each
    cgroup's limit, read the first time one of them is in it, with the kernel's count beside a limit: the refusals
    (pids), the peak charge (memory), the periods throttled (cpu)."""

    def __init__(self, kind: tuple[str, str, str, str] = MEMORY_KIND, root: str = CGROUP_ROOT,
                 mounts: dict[str, str] | None = None) -> None:
        self.kind, self.root = kind, root
        # which cgroup each mount shows as its root: read once, and only for the host's own cgroup tree
        self.mounts = mounts if mounts is not None else cgroup_mounts() if root == CGROUP_ROOT else {}
        self.seen: set[tuple[int, str]] = set()
        self.counted: list[dict[str, object]] = []  # pids cgroups with a limit whose count was read: read again

    def join(self, entry: dict[str, object], data: bytes | None) -> dict[str, object] | None:
        """Sets a joining process's tree entry's field (its cgroup's path, from data: its /proc/PID/cgroup) where
        readable; returns the record's fields where its cgroup is new (least_limit, `member`: its pid, and
        `refused` (and `refused_own`: refused()) for a pids limit), else None."""
        found = parse_cgroup(data, self.kind[0])
        if found is None:
            return None
        entry[self.kind[1]] = found[1]
        if found in self.seen or len(self.seen) >= MAX_CGROUPS:
            return None
        self.seen.add(found)
        fields = least_limit(found[0], found[1], self.root, self.kind, self.mounts)
        if fields is not None:
            fields["member"] = entry["pid"]  # the process whose joining read it
        if fields is not None and "limit" in fields:
            counts = COUNTS[self.kind[0]][1](fields, self.root, self.mounts)
            if counts:
                fields.update(counts)
                self.counted.append(fields)
        return fields

    def again(self, after: float | None = None) -> list[dict[str, object]]:
        """The cgroups with a limit read at their join, with their count read now: `final` at the watcher's end, or
        `after` the ts of a pool job's error the watcher has just read (a count then is one the failure's cause may
        be in; one read at the end may hold refusals after it). For pids, the rise is the forks and thread starts
        the limit refused in between; for memory, a higher peak is one reached then; for cpu, the periods in between and
        those the quota stopped the cgroup's tasks in."""
        out = []
        keys, read = COUNTS[self.kind[0]]
        mark = {"final": True} if after is None else {"after": after}
        for fields in self.counted:
            counts = read(fields, self.root, self.mounts)
            if counts:  # the join's counts are not carried: a count unread now is absent
                out.append({**{k: v for k, v in fields.items() if k not in keys}, **counts, **mark})
        return out
