"""What the watcher reads of the run's cgroups (watcher/cgroups.py), on made cgroup trees and a made log: when it
reads a pids limit's count of refusals again, and which limits apply to a cgroup at all."""

from __future__ import annotations

import json
from pathlib import Path

from wp_autotrace.watcher.cgroups import MEMORY_KIND, PIDS_KIND, Cgroups, cgroup_mounts, least_limit, memory_limit
from wp_autotrace.watcher.logwatch import LogWatch

from .conftest import read_log
from .test_sampler import FakeReader, make_watcher


def _put(root: Path, rel: str, name: str, text: str) -> None:
    (root / rel).mkdir(parents=True, exist_ok=True)
    (root / rel / name).write_text(text + "\n")


def _error_return(pid: int, ts: float, error: str) -> bytes:
    """A return record as the sink writes it (compact JSON) whose call raised `error`."""
    return json.dumps({"v": 1, "event": "return", "ts": ts, "pid": pid, "host": "h", "role": "main", "seq": 5,
                       "call_id": 3, "duration_s": 0.1, "error": error}, separators=(",", ":")).encode() + b"\n"


def test_a_pids_limits_count_is_read_again_as_the_watcher_reads_a_members_job_error(tmp_path: Path) -> None:
    """The failure's cause can only be in a count of refusals read by the time the failure is seen: as the watcher
    reads a run member's return record whose call raised a pool job's error (SubprocException), it reads every pids
    limit's pids.events again and writes it (`after`: that record's ts), once per run. Not for another process's
    error (not a member), nor for an error that is no job's; the count at the watcher's end (`final`) stays."""
    cg = tmp_path / "cg"
    _put(cg, "pids/box", "pids.max", "24")
    _put(cg, "pids/box", "pids.events", "max 0")
    r = FakeReader()
    r.add(100, 1, 1.0)
    w, log = make_watcher(tmp_path, r)
    pids = Cgroups(PIDS_KIND, str(cg))
    w.cgroups = (Cgroups(MEMORY_KIND, str(cg)), pids)
    assert (pids.join({"pid": 100}, b"12:pids:/box\n") or {}).get("refused") == 0
    w.tree.log = LogWatch(w.sink.fd, str(log), "h", "run1", 100, log.stat().st_size)
    w.tick()
    _put(cg, "pids/box", "pids.events", "max 3")
    with open(log, "ab") as f:
        f.write(_error_return(555, 2.0, "SubprocException: An exception occurred in a subprocess: x"))  # not ours
        f.write(_error_return(100, 2.05, "ValueError: bad"))  # no pool job's
    w.tick()
    assert not [x for x in read_log(log) if x["event"] == "pidcg"]
    with open(log, "ab") as f:
        f.write(_error_return(100, 2.1, "SubprocException: An exception occurred in a subprocess:\n\nName=k0"))
    w.tick()
    _put(cg, "pids/box", "pids.events", "max 7")
    with open(log, "ab") as f:  # a second failure: the first one's read stands
        f.write(_error_return(100, 2.3, "SubprocException: An exception occurred in a subprocess:\n\nName=k1"))
    w.tick()
    w.finish("run-ended")
    recs = [(x.get("after"), x.get("final"), x["refused"]) for x in read_log(log) if x["event"] == "pidcg"]
    assert recs == [(2.1, None, 3), (None, True, 7)], recs


def test_a_v1_ancestors_memory_limit_holds_only_where_it_charges_its_children(tmp_path: Path) -> None:
    """v1's memory controller charges a cgroup's children to it only with memory.use_hierarchy 1 (RHEL 7's kernels
    let it be 0): a limit on a parent whose use_hierarchy is 0 does not hold its child, and is not the child's
    limit; with 1 it is (and named as the one above). The pids controller is always hierarchical."""
    root = tmp_path / "cg"
    _put(root, "memory/job", "memory.limit_in_bytes", str(512 << 20))
    _put(root, "memory/job", "memory.use_hierarchy", "0")
    _put(root, "memory/job/step", "memory.limit_in_bytes", "9223372036854771712")
    _put(root, "memory/job/step", "memory.use_hierarchy", "0")
    _put(root, "memory", "memory.use_hierarchy", "1")
    assert memory_limit(1, "/job/step", str(root)) == {"version": 1, "path": "/job/step",
                                                        "file": "memory.limit_in_bytes"}
    _put(root, "memory/job", "memory.use_hierarchy", "1")
    assert memory_limit(1, "/job/step", str(root)) == {
        "version": 1, "path": "/job/step", "file": "memory.limit_in_bytes", "limit": 512 << 20, "limit_path": "/job"}
    _put(root, "pids/job", "pids.max", "24")  # pids: no such flag, the parent's limit holds
    _put(root, "pids/job", "memory.use_hierarchy", "0")
    _put(root, "pids/job/step", "pids.max", "max")
    assert (least_limit(1, "/job/step", str(root), PIDS_KIND) or {}).get("limit") == 24


def test_a_cgroup_mount_that_shows_the_containers_own_cgroup_as_its_root_is_read_there(tmp_path: Path) -> None:
    """A docker container on v1 without a cgroup namespace: /proc/PID/cgroup names the process's memory cgroup by its
    whole path (/docker/abc), while the container's /sys/fs/cgroup/memory mount shows that cgroup as its root
    (mountinfo's field 4). Its limit, peak and refusals are read at the mount's root and named /docker/abc, its own
    (not "/", a limit above it); a cgroup outside the mount's root is not visible there: unread, no record."""
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "mountinfo").write_text(
        "30 25 0:26 /docker/abc /sys/fs/cgroup/memory ro,nosuid master:12 - cgroup cgroup rw,memory\n"
        "31 25 0:27 /docker/abc /sys/fs/cgroup/pids ro,nosuid - cgroup cgroup rw,pids\n"
        "32 25 0:28 / /sys/fs/cgroup/unified rw shared:9 - cgroup2 cgroup2 rw\n"
        "33 25 8:1 / /mnt/my\\040disk rw - ext4 /dev/sda rw\n")
    assert cgroup_mounts(str(proc)) == {"/sys/fs/cgroup/memory": "/docker/abc", "/sys/fs/cgroup/pids": "/docker/abc",
                                        "/sys/fs/cgroup/unified": "/"}
    root = tmp_path / "cg"
    mounts = {str(root / "memory"): "/docker/abc", str(root / "pids"): "/docker/abc"}
    _put(root, "memory", "memory.limit_in_bytes", str(256 << 20))
    _put(root, "memory", "memory.max_usage_in_bytes", str(100 << 20))
    _put(root, "pids", "pids.max", "24")
    _put(root, "pids", "pids.events", "max 2")
    memory = Cgroups(MEMORY_KIND, str(root), mounts)
    assert memory.join({"pid": 7}, b"4:memory:/docker/abc\n") == {
        "version": 1, "path": "/docker/abc", "file": "memory.limit_in_bytes", "limit": 256 << 20,
        "peak": 100 << 20, "member": 7}
    pids = Cgroups(PIDS_KIND, str(root), mounts)
    assert (pids.join({"pid": 7}, b"3:pids:/docker/abc\n") or {}).get("refused") == 2
    assert least_limit(1, "/other", str(root), MEMORY_KIND, mounts) is None
    assert (least_limit(1, "/docker/abc/inner", str(root), MEMORY_KIND, mounts) or {}).get("limit_path") == \
        "/docker/abc"


def test_a_v2_limit_above_the_processs_cgroup_has_its_refusals_read_in_both_cgroups(tmp_path: Path) -> None:
    """v2, the pids limit on /job above the process's own /job/step: before Linux 6.13 the kernel counts a refusal
    in the forking task's cgroup (the limit's pids.events stays 0), from 6.13 in the limit's. Each read (the join,
    the one as a job's error is read, the end) reads both: `refused` at the limit, `refused_own` at the process's
    cgroup. Where the process's cgroup sets the limit itself, or in v1 (counted in the forking task's cgroup, read
    there), one read: no `refused_own`."""
    cg = tmp_path / "cg"
    _put(cg, "job", "pids.max", "24")
    _put(cg, "job", "pids.events", "max 0")
    _put(cg, "job/step", "pids.max", "max")
    _put(cg, "job/step", "pids.events", "max 0")
    pids = Cgroups(PIDS_KIND, str(cg), {})
    joined = pids.join({"pid": 100}, b"0::/job/step\n") or {}
    assert (joined.get("limit_path"), joined.get("refused"), joined.get("refused_own")) == ("/job", 0, 0), joined
    _put(cg, "job/step", "pids.events", "max 3")  # a kernel before 6.13: counted where the forking task is
    assert [(r["refused"], r["refused_own"], r["after"]) for r in pids.again(after=2.0)] == [(0, 3, 2.0)]
    (cg / "job/step/pids.events").unlink()  # unread now: the join's count is not carried into this read
    assert [(r["refused"], "refused_own" in r, r["final"]) for r in pids.again()] == [(0, False, True)]
    _put(cg, "box", "pids.max", "24")
    _put(cg, "box", "pids.events", "max 1")
    boxed = pids.join({"pid": 101}, b"0::/box\n") or {}
    assert boxed.get("refused") == 1 and "refused_own" not in boxed and "limit_path" not in boxed, boxed
    _put(cg, "pids/job", "pids.max", "24")
    _put(cg, "pids/job", "pids.events", "max 0")
    _put(cg, "pids/job/step", "pids.events", "max 5")
    v1 = Cgroups(PIDS_KIND, str(cg), {}).join({"pid": 102}, b"3:pids:/job/step\n") or {}
    assert (v1.get("limit_path"), v1.get("refused"), "refused_own" in v1) == ("/job", 5, False), v1
