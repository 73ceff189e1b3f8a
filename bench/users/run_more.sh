#!/usr/bin/env bash
# Runs the further user cases of docs/users.md ("Six more", "Three more", then the kernel, actor, pre-fork, torchrun,
# thread and container (/dev/shm, ulimit -u) cases, the shared host's (a wiped cache, a job's memory cgroup), and a
# container's pids limit and a restarted server's port, a container's CPU quota, a compile that never ends,
# an exported setting a library overwrites, a packaged application's other Python, a Ctrl-C that leaves a compiler,
# a compile wait timeout whose exit hangs in the quiesced pool's shutdown, a daemonic spawn child its parent joins,
# a server's graceful drain whose pool its stop's group SIGTERM killed, a worker its own kernel's compile crashed,
# a threads variable a library sets after torch read it, a fork pool made by a process with threads),
# one at a time, each under the independent probe, and scores them.   bash bench/users/run_more.sh /tmp/users-more [case ...]
set -u
OUT=${1:-/tmp/users-more}; shift || true
cd "$(dirname "$0")/../.."
PY=$PWD/.venv/bin/python
U=$PWD/bench/users
run() {  # run NAME [probe options] -- command
    local name=$1; shift
    if [ -n "$ONLY" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi
    timeout 400 "$PY" "$U/probe.py" --out "$OUT/$name" "$@" > "$OUT/$name.probe.txt" 2>&1
    "$PY" "$U/score.py" "$OUT/$name" > "$OUT/$name/score.txt" 2>&1
    echo "== $name"; grep -v '^ANSWER' "$OUT/$name/score.txt"
}
ONLY="$*"
mkdir -p "$OUT"
run pipe_held --timeout 150 --linger 6 -- "$PY" "$U/pipe_held.py"
run shutdown_recompile --linger 6 -- "$PY" "$U/shutdown_recompile.py"
run sidecar_start_fails --linger 6 -- "$PY" -m pytest -q -p no:cacheprovider "$U/sidecar_start_fails.py"
run autotune_subproc --linger 6 -- "$PY" "$U/autotune_subproc.py"
run launcher_killed --via-run --linger 12 -- "$PY" "$U/launcher_killed.py"
run idle_cpu --linger 6 -- "$PY" "$U/idle_cpu.py"
run worker_oom --linger 6 -- "$PY" "$U/worker_oom.py"
run worker_crash --linger 6 -- "$PY" "$U/worker_crash.py"
run spawn_main --linger 6 -- "$PY" "$U/spawn_main.py"
run collector_threads --linger 6 -- "$PY" "$U/collector_threads.py"
run jupyter_kernel --timeout 300 --linger 6 -- "$PY" "$U/jupyter_kernel.py"
run actor_ranks --timeout 300 --linger 6 -- "$PY" "$U/actor_ranks.py"
run preload_fork --timeout 300 --linger 6 -- "$PY" "$U/preload_fork.py"
run torchrun_restart --timeout 380 --linger 6 -- "$PY" -m torch.distributed.run --standalone --nproc-per-node=2 \
    --max-restarts=1 --monitor-interval=0.5 "$U/torchrun_restart.py"
run thread_after_exit --timeout 360 --linger 6 -- "$PY" "$U/thread_after_exit.py"
run threads_race --timeout 360 --linger 6 -- "$PY" "$U/threads_race.py"
# A container whose /dev/shm an earlier job's leftover buffers fill (a 64 MB tmpfs in a mount namespace).
run shm_full --timeout 300 --linger 6 -- unshare -rm sh -c 'mount -t tmpfs -o size=64m tmpfs /dev/shm &&
    { dd if=/dev/zero of=/dev/shm/deepspeed_allreduce_buffer_0 bs=1M count=64 2>/dev/null; exec "$0" "$1"; }' \
    "$PY" "$U/shm_full.py"
# A node's `ulimit -u` (RLIMIT_NPROC): root is exempt, so the job runs as nobody, with a python nobody can reach.
if [ -z "$ONLY" ] || [[ " $ONLY " == *" nproc_limit "* ]]; then
    NPY=$(bash "$U/nobody_python.sh") && mkdir -p "$OUT/nproc_limit" && chmod 777 "$OUT/nproc_limit"
    run nproc_limit --timeout 300 --linger 6 -- setpriv --reuid=65534 --regid=65534 --clear-groups \
        prlimit --nproc=24:24 "$NPY" "$U/nproc_limit.py"
fi
# A compile cache shared with another runner on the host, whose install step wipes it while this job's pool loads
# its kernels: the wiper runs outside the traced tree, 4 s after the job's first kernel module is in the cache.
if [ -z "$ONLY" ] || [[ " $ONLY " == *" cache_wiped "* ]]; then
    CACHE=$OUT/cache_wiped.cache && rm -rf "$CACHE" && mkdir -p "$CACHE"
    ( for _ in $(seq 1500); do grep -rlq triton_poi_fused "$CACHE" 2>/dev/null && break; sleep 0.2; done
      sleep 4; echo "wiped $CACHE at $(date -u +%T.%N)"; rm -rf "${CACHE:?}"/* ) > "$OUT/cache_wiped.wiper.txt" 2>&1 &
    WIPER=$!
    run cache_wiped --timeout 300 --linger 6 --env TORCHINDUCTOR_CACHE_DIR="$CACHE" -- "$PY" "$U/cache_wiped.py"
    kill $WIPER 2>/dev/null; wait $WIPER 2>/dev/null
fi
# A batch job's memory limit: a memory cgroup (v1, as slurmstepd makes one per step) whose limit fits the job
# without a compile pool (about 660 MiB charged with TORCHINDUCTOR_COMPILE_THREADS=1) and not with one (about 900).
if [ -z "$ONLY" ] || [[ " $ONLY " == *" slurm_oom "* ]]; then
    CG=/sys/fs/cgroup/memory$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)/wp_users_step_$$
    mkdir -p "$CG" && echo $((768 << 20)) > "$CG/memory.limit_in_bytes"
    run slurm_oom --timeout 300 --linger 6 -- sh -c 'echo $$ > "$0/cgroup.procs" && exec "$1" "$2"' "$CG" \
        "$PY" "$U/slurm_oom.py"
    grep -E '^(oom_kill|under_oom)' "$CG/memory.oom_control" > "$OUT/slurm_oom.cgroup.txt" 2>&1
    cat "$CG/memory.max_usage_in_bytes" "$CG/memory.failcnt" >> "$OUT/slurm_oom.cgroup.txt" 2>&1
    rmdir "$CG" 2>/dev/null
fi
# A container's pids limit (podman's --pids-limit: a pids cgroup, which counts root's tasks too; ulimit -u is far
# away): it fits the job and its pool (12 tasks at ready), not its linkers' threads (46 at once without the limit).
if [ -z "$ONLY" ] || [[ " $ONLY " == *" pids_limit "* ]]; then
    PCG=/sys/fs/cgroup/pids/wp_users_pids_$$
    mkdir -p "$PCG" && echo 24 > "$PCG/pids.max"
    run pids_limit --timeout 300 --linger 6 -- sh -c 'echo $$ > "$0/cgroup.procs" && exec "$1" "$2"' "$PCG" \
        "$PY" "$U/pids_limit.py"
    cat "$PCG/pids.max" "$PCG/pids.peak" "$PCG/pids.events" > "$OUT/pids_limit.cgroup.txt" 2>&1
    for _ in 1 2 3 4 5; do rmdir "$PCG" 2>/dev/null && break; sleep 1; done
fi
# A server restarted after a hard crash, whose fork pool's workers still hold its listening socket.
run port_held --timeout 300 --linger 6 -- "$PY" "$U/port_held.py"
# A container's CPU quota (docker --cpus, a pod's limits.cpu): a cpu cgroup (v1, as the runtime makes one) whose CFS
# quota is a fifth of a CPU, on a box whose 2 CPUs the job still sees (the pool is sized by them).
if [ -z "$ONLY" ] || [[ " $ONLY " == *" cpu_quota "* ]]; then
    CCG=/sys/fs/cgroup/cpu/wp_users_cpu_$$
    mkdir -p "$CCG" && echo 100000 > "$CCG/cpu.cfs_period_us" && echo 20000 > "$CCG/cpu.cfs_quota_us"
    run cpu_quota --timeout 400 --linger 6 ${CPU_QUOTA_ENV:+--env "$CPU_QUOTA_ENV"} -- \
        sh -c 'echo $$ > "$0/cgroup.procs" && exec "$1" "$2"' "$CCG" "$PY" "$U/cpu_quota.py"
    cat "$CCG/cpu.cfs_quota_us" "$CCG/cpu.stat" > "$OUT/cpu_quota.cgroup.txt" 2>&1
    for _ in 1 2 3 4 5; do rmdir "$CCG" 2>/dev/null && break; sleep 1; done
fi
# A compile that never ends (one kernel's compiler spins in a compile worker), ended by the CI step's time limit:
# coreutils timeout, SIGTERM to the job's process group at 60 s.
run stuck_kernel --timeout 200 --linger 6 -- timeout 60 "$PY" "$U/stuck_kernel.py"
# A TORCHINDUCTOR_COMPILE_THREADS the user exported, which a serving library's import overwrites before torch reads it.
run threads_clobbered --linger 6 --env TORCHINDUCTOR_COMPILE_THREADS=2 -- "$PY" "$U/threads_clobbered.py"
# A packaged application whose sys.executable names the platform's Python, not the bundled one its code runs on.
run other_python --linger 6 -- "$PY" "$U/other_python.py"
# A compile interrupted with Ctrl-C (SIGINT to the job's process group, as a terminal sends it) while its kernel's
# compiler runs: the compiler ignores SIGINT as torch's compile processes do, and outlives the pool.
run interrupted_compiler --linger 6 -- "$PY" "$U/interrupted_compiler.py"
# A CI job's compile wait timeout (TORCHINDUCTOR_COMPILE_WORKER_WAIT_TIMEOUT) on a kernel longer than the pool's
# quiesce timer: the job fails at once, its exit waits in the sidecar's shutdown for the kernel the quiesce left.
run quiesce_exit_hang --timeout 200 --linger 6 -- "$PY" "$U/quiesce_exit_hang.py"
# A daemonic spawn child that runs a compiled function; its parent puts the end on the queue and joins it.
run daemon_child --timeout 300 --linger 6 -- "$PY" "$U/daemon_child.py"
# A service stopped by a SIGTERM to its whole process group (systemd's default KillMode) while its handler drains.
run graceful_drain --timeout 300 --linger 6 -- "$PY" "$U/graceful_drain.py"
# A library that asks for one compile thread through the environment after torch's inductor config loaded.
run threads_set_late --linger 6 -- "$PY" "$U/threads_set_late.py"
# A fork compile pool made by a process with threads: a worker forked while a thread held a lock never gets it;
# the compile waits until the CI step's time limit (coreutils timeout, SIGTERM to the job's group at 60 s).
run fork_threads_hang --timeout 200 --linger 6 -- timeout 60 "$PY" "$U/fork_threads_hang.py"
