"""Every finding kind the report can say, in one table: what each says and what it advises, for people.

docs/report.md's list of kinds is generated from KINDS (tools/report_doc.py), and tests/test_report_doc.py
checks that every kind a finding function can return is here and that the page is current.
"""

from __future__ import annotations

# kind -> (what it says, what to do), in the order docs/report.md lists them.
KINDS: dict[str, tuple[str, str]] = {
    "leftovers": ("processes of the run outlived its main process: how many, their roles, their memory; a program "
                  "a compile job ran (a compiler) that outlived its pool, with who started it and the ending "
                  "signals it ignores (SIGINT, inherited from torch's compile processes)",
                  "`wp-autotrace cleanup LOG`, then stop their cause; a job's program: SIGTERM (`kill PID`), and "
                  "next time SIGTERM to the job's process group or TORCHINDUCTOR_COMPILE_THREADS=1"),
    "idle-pool": ("a pool sat idle after its last job, or 10 s or more between its uses: seconds, real memory "
                  "(PSS), GiB·s, who shut it down",
                  "shutdown_compile_workers() after the last compile, compile_threads=1, or a lower quiesce "
                  "time; a setting first where a library made the pool"),
    "compile-after-exit": ("a thread's compile failed because the process's main thread had returned: Python "
                           "refuses new work to concurrent.futures executors (inductor's compile thread pool) from "
                           "then on; the thread, when the main thread returned, the pool made since",
                           "join the compiling threads before the main thread returns, or compile_threads=1"),
    "pools-made-at-once": ("threads of one process each made a compile pool at once (AsyncCompile.process_pool() "
                           "lets every caller in while its first call starts the sidecar): the threads, the "
                           "processes, which pool ran the jobs since and what the others held idle",
                           "make the pool once before the threads start (AsyncCompile.warm_pool() in the main "
                           "thread), or compile_threads=1"),
    "nested-pools": ("warm_pool ran inside compile sidecars or workers: each call starts another sidecar",
                     "keep the backend out of the sidecars, or WP_AUTOTRACE_GUARD=nested-pools"),
    "warm-pool-bypass": ("TORCH_WARM_POOL=0 was set where warm_pool was still called directly",
                         "stop the direct call at its source, or the guard"),
    "slow-exit-wait": ("the main process waited seconds in shutdown_compile_workers: torch's own call at exit, "
                       "or the user's own call (told as theirs, at its line)",
                       "at exit: shut the pool down after the last compile, or stop the nesting; the user's own "
                       "call: nothing in it shortens the wait (no pool: compile_threads=1)"),
    "child-exit-wait": ("a child process spent seconds shutting its pool down at its exit: its parent's "
                        "join() waits (pytorch#115366)", "shut the pool down at the end of the child's work"),
    "exit-hang": ("the process waited at exit in concurrent.futures' join of its process pool's workers (a job "
                  "never ended; a sidecar's: of the pool it serves): its seconds, until it ended or was killed, the "
                  "jobs pending as the join began and which worker held which since when",
                  "find why the job never ends; end the pool's workers or shut the pool down before exit"),
    "fork-pool-hang": ("a fork pool made while its process ran other threads, and that process's wait on it "
                       "never returned or was interrupted (a lock held at the fork is never released in a worker); "
                       "the worker that held the job, from its own job records",
                       'worker_start_method="subprocess" or compile_threads=1, or make the pool before other '
                       "threads start"),
    "pool-job-hang": ("a process's wait on its compile pool (not a fork pool made beside threads: fork-pool-hang) "
                      "never returned, or was interrupted on a job held 300 s or more (torch's own bar for a stuck "
                      "compile job) or by torch's own timeout, while a worker of that pool held a job: which worker, "
                      "since when, the job's function (and a child it started that was still running at its end: "
                      "a compiler, a linker), from the worker's own job records",
                      "see what that worker is doing (py-spy dump --pid PID), and the child its job started, still "
                      "running at its end (a compiler: its CPU, its wchan); compile_threads=1 runs the job in the "
                      "main process, where it hangs with a traceback"),
    "pool-wait-interrupted": ("a process's wait on its compile pool was interrupted (Ctrl-C) while a worker ran a job "
                              "that had run less than the 300 s torch's own CI allows a compile job: which worker, the "
                              "job, and whether it ended after the interrupt; no record shows a hang",
                              "nothing to fix from the log; TORCHINDUCTOR_COMPILE_WORKER_WAIT_TIMEOUT=300 makes torch "
                              "name a job that does not finish; py-spy on the worker shows what it does"),
    "interrupted-job": ("a pool's creator got SIGINT (a traced process's signal: Jupyter's Interrupt, a Ctrl-C a "
                        "launcher passed on) while a worker of its pool held a job: the job ran on, how long, and the "
                        "workers the pool started beside it meanwhile",
                        "let the job finish, or end the pool (shutdown_compile_workers()) or the process"),
    "compile-failed": ("kernels whose compile job failed in the pool, as the compiling process's wait raised it: "
                       "how many the records name, the job's own error line; \"the process limit (ulimit -u N) was "
                       "reached\" only where a process under the pool (a job's linker or compiler) ended by a refused "
                       "thread or process start (EAGAIN) and counted N tasks of its uid as it ended, or the job's "
                       "error is EAGAIN and one moment of the records counts that many; else the cause unknown",
                       "where the limit was reached: a higher `ulimit -u` (SLURM's, the container's), or "
                       "TORCHINDUCTOR_COMPILE_THREADS=1 for fewer workers; where the job's own line says a file it "
                       "read back was gone (\"source code not available\", FileNotFoundError): if the compile cache is "
                       "shared with other jobs, one per job (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR), never wiped "
                       "while in use; else the job's own error line"),
    "pool-outlived-creator": ("a pool's processes were seen to end 5 s or more after the process that made them "
                              "ended: nobody could use or stop them; forked workers hold what they inherited: the "
                              "creator's listening sockets (its port stays bound until they end: told first, where "
                              "the watcher read one) and stdout/stderr (a parent reading those to their end waits "
                              "as long: told where the watcher saw the parent hold their read end)",
                              'worker_start_method="subprocess" or compile_threads=1 (a fork pool); else shut the '
                              "pool down before its creator ends"),
    "autotune-killed": ("a benchmark an autotune subprocess never answered: torch's TuningProcess.kill on get's "
                        "timeout (SIGKILL), the subprocess started in its place, and the zombie the killed one "
                        "stayed under its creator (kill() never waits)",
                        "lower torch._inductor.config.max_autotune_subproc_result_timeout_seconds: each hung "
                        "candidate costs the whole timeout"),
    "setting-overridden": ("a process started with a pool variable (TORCHINDUCTOR_COMPILE_THREADS) whose setting "
                           "was another value when torch._inductor.config loaded: both values, what its compiles "
                           "then took", "set the setting in code after the imports, before the first compile"),
    "setting-too-late": ("worker_start_method or compile_threads (the variable or the config) set after the "
                         "process's pool existed (seen at a later AsyncCompile.wait): it changed nothing, and why",
                         "set it before torch is imported, or set the config and shut the pool down"),
    "spawn-main-reimport": ("a spawned child (a spawn pool's worker) imported the main script again as __mp_main__ "
                            "and its unguarded top level ran there; where it raised, the child died and its pool "
                            "broke", 'the script\'s top level under `if __name__ == "__main__":`, or '
                            'worker_start_method="subprocess"'),
    "pool-device-files": ("pool processes hold accelerator device files (pytorch#134084)",
                          "start the pool before the first device call"),
    "pool-died": ("a pool's sidecar ended before anything asked it to stop, or its stop request found it dead: "
                  "how, in its evidence's words (docs/evidence.md)", "by that evidence: a group signal -> the "
                  "pool's own session, or shut down and re-create it in the handler; an OOM kill -> memory; a "
                  "signal -> who sent it; unknown -> the kernel log"),
    "oom-killed": ("processes of the run the OOM killer ended (the cgroup's OOM kill count rose at their end; a "
                   "pool's sidecar is told by pool-died), with their memory cgroup's limit where the watcher read "
                   "one", "fewer compile workers where pools lived then "
                   "(TORCHINDUCTOR_COMPILE_THREADS=1), else more memory for the job"),
    "oom-in-cgroup": ("OOM kills the run's cgroup counted at no end of the run's processes: when, never whom (a "
                      "process outside the run sharing its cgroup, or an end not seen)",
                      "the kernel log names it; more memory for the cgroup, or less beside the job"),
    "worker-lost": ("compile workers ended under a sidecar that lived on, with a job in flight: the job's "
                    "BrokenProcessPool (torch's job callback logs it in the sidecar), which workers ended and how "
                    "(only where a record shows it), the new workers the sidecar started",
                    "the kernel log (dmesg) for why it ended; TORCHINDUCTOR_COMPILE_THREADS=1, or more memory; run the "
                    "compile again (the pool serves on)"),
    "jobs-lost": ("jobs sent to (or in flight in) a pool whose sidecar had ended: they never return; the line "
                  "that sent the last one", "make a new pool after the old one died"),
    "jobs-cut-off": ("jobs still running in a pool when it was asked to stop, and what that means on the run's "
                     "torch (cut off, or the five-minute process.wait(300))",
                     "wait for the pool's jobs before shutting it down"),
    "zombies": ("processes of the run left defunct (ended, never reaped), under which parent",
                "an init that reaps orphans (`docker run --init`, tini), or a parent that waits"),
    "sidecar-never-served": ("a sidecar never served its pool (its main() raised, it ran another Python than its "
                             "creator and died untraced, or nothing asked it to stop)",
                             "fix what it raised (give torch the creator's Python as sys.executable), or shut the "
                             "pool down before exit"),
    "pool-ready-wait": ("a process waited for the compile pool it made to become ready (AsyncCompile."
                        "wait_pool_ready), and 1 s or more of it and a quarter of the sidecar's own start passed "
                        "before its sidecar started: its seconds, its threads then, when the sidecar appeared; where "
                        "its workers recorded jobs, the pool's first use after it (1 s or more): its seconds and the "
                        "seconds its workers ran jobs in them, a slow compile told from a slow way to and from the "
                        "pool",
                        "start the pool before the program's threads (AsyncCompile.warm_pool() at startup), or "
                        "compile_threads=1"),
    "cpu-quota-pool": ("a compile pool larger than the CPU quota its processes ran in (a container's --cpus, a pod's "
                       "limits.cpu: torch sizes the pool by the CPUs the job sees, not by the quota), where the "
                       "kernel throttled the quota's cgroup during the run: the quota, the pool's size, the periods "
                       "throttled and the time stood still",
                       "TORCHINDUCTOR_COMPILE_THREADS=1 (or a pool no larger than the quota's CPUs), or a larger "
                       "quota"),
    "forked-compile-hang": ("a process forked (not exec'd) after its parent compiled with compile threads waited "
                            "in AsyncCompile.wait, which never returned (or was interrupted): the parent's compile "
                            "thread pool has no threads in the child",
                            "TORCHINDUCTOR_COMPILE_THREADS=1, or compile only after the fork, or spawn"),
    "call-never-returned": ("a traced call was entered and never left in a process that ended",
                            "where it was called from, and the process's last record"),
    "wakeup-no-pool": ("AsyncCompile.wakeup() returned without waking a sidecar", "check compile_threads"),
    "root-killed": ("the main process ended without process_exit (killed, or os._exit; the signal when "
                    "`run` saw it)", "what was still alive after it"),
    "root-os-exit": ("the main process left by os._exit: torch's atexit shutdown of its pools did not run",
                     "shut pools down before os._exit"),
    "in-progress": ("the run had not ended at the last record", "report again, or `wp-autotrace watch`"),
    "verdict-pending": ("the main process ended and the watcher has not written what it left yet",
                        "read the report again in a few seconds"),
    "no-verdict": ("no verdict will come (no watcher, or it ended without one)", "look with `ps`"),
    "records-lost": ("the watcher could not write some records (a full disk)", "give the log room"),
    "watcher-signalled": ("the watcher was sent SIGTERM/SIGINT/SIGHUP (a job step's end: by whom, when, what it "
                          "saw after) or SIGUSR1/2 (ignored)", "a time limit: more time, or stop sooner"),
    "tracer-errors": ("the tracer reported errors or dropped records", "see the errors"),
    "export-failed": ("the live export could not send spans, with the receiver's answer; no record was lost",
                      "check the collector; export again from the log"),
    "log-cut": ("parts of the log were cut (a list too long for one record)", "counts come from totals"),
    "guard-refused": ("the nested-pools guard refused calls", ""),
    "guard-idle": ("the guard was on and refused nothing", ""),
}


def kinds_table() -> str:
    """docs/report.md's table of finding kinds."""
    rows = ["| kind | says | what to do |", "|---|---|---|"]
    rows += [f"| `{kind}` | {says} | {todo or '—'} |" for kind, (says, todo) in KINDS.items()]
    return "\n".join(rows) + "\n"
