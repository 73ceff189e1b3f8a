"""Differential: each program untraced, traced (WP_AUTOTRACE=1) and under `wp-autotrace run`; compare rc, stdout,
stderr. Usage: diff.py PYTHON [name ...]"""
import os, re, subprocess, sys, tempfile, textwrap
PY = sys.argv[1]
PROGS = {
"closefds": "import os\nos.closerange(0, 1<<16)\nos._exit(7)",
"closefds_exit": "import os,sys\nos.closerange(3, 1<<16)\nprint('ok')\nsys.exit(5)",
"fork200": """import os
pids=[]
for i in range(200):
    p=os.fork()
    if p==0: os._exit(i%7)
    pids.append(p)
s=0
for p in pids: s+=os.waitstatus_to_exitcode(os.waitpid(p,0)[1])
print(s)""",
"exec": "import os,sys\nsys.stdout.flush()\nos.execv('/bin/echo',['echo','hi'])",
"execpy": "import os,sys\nos.execv(sys.executable,[sys.executable,'-c','import sys;print(2);sys.exit(4)'])",
"posix_spawn": "import os\np=os.posix_spawn('/bin/sh',['sh','-c','echo x; exit 3'],os.environ)\nprint(os.waitpid(p,0)[1]>>8)",
"mp_spawn": """import multiprocessing as mp
def f(x): return x*x
if __name__=='__main__':
    ctx=mp.get_context('spawn')
    with ctx.Pool(2) as p: print(sum(p.map(f, range(50))))""",
"mp_forkserver": """import multiprocessing as mp
def f(x): return x*x
if __name__=='__main__':
    ctx=mp.get_context('forkserver')
    with ctx.Pool(2) as p: print(sum(p.map(f, range(50))))""",
"sighandlers": """import signal,os,sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.kill(os.getpid(), signal.SIGTERM)
signal.signal(signal.SIGINT, lambda *a: print('int'))
os.kill(os.getpid(), signal.SIGINT)
print(signal.getsignal(signal.SIGCHLD), signal.getsignal(signal.SIGPIPE))
print(sorted(signal.Signals(s).name for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])))
signal.signal(signal.SIGUSR1, signal.SIG_DFL)
os.kill(os.getpid(), signal.SIGUSR1)""",
"threads": "import threading,sys\nprint(threading.active_count(), [t.name for t in threading.enumerate()], sys.getrecursionlimit())",
"stdin": "import sys\nprint(repr(sys.stdin.read()))",
"fds": "import os\nprint(sorted(int(x) for x in os.listdir('/proc/self/fd')))",
"cwd_umask": "import os\nprint(os.getcwd(), oct(os.umask(0)))",
"setsid_kill": """import os, signal, time
os.setpgrp()
print('pg', os.getpgrp()==os.getpid())""",
"abort": "import os\nos.abort()",
"segv": "import ctypes\nctypes.string_at(0)",
"sigterm_self": "import os,signal\nos.kill(os.getpid(), signal.SIGTERM)",
"systemexit_str": "raise SystemExit('bye')",
"kbint": "raise KeyboardInterrupt",
"subinterp_mp": """import _xxsubinterpreters as si
i = si.create()
si.run_string(i, 'import os, sys; r, w = os.pipe(); pid = os.fork() if False else 0; print(sys.flags.isolated)')
si.destroy(i)""",
}
if True:
    PROGS["subinterp"] = """import _xxsubinterpreters as si
i = si.create()
si.run_string(i, 'import os; print(os.getpid() > 0)')
si.destroy(i)
print('ok')"""
names = sys.argv[2:] or list(PROGS)
wp = os.path.join(os.path.dirname(PY), "wp-autotrace")
def norm(b):
    b = re.sub(rb"\b\d{3,7}\b", b"N", b)
    return b
bad = 0
for name in names:
    src = textwrap.dedent(PROGS[name])
    d = tempfile.mkdtemp(prefix=name, dir="/tmp/rv/diff")
    path = os.path.join(d, "p.py"); open(path, "w").write(src)
    base = {k: v for k, v in os.environ.items() if not k.startswith("WP_AUTOTRACE")}
    runs = {}
    for mode in ("off", "on", "run"):
        env = dict(base)
        cmd = [PY, path]
        if mode == "on":
            env.update(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=os.path.join(d, "on.jsonl"))
        if mode == "run":
            cmd = [wp, "run", "--log", os.path.join(d, "run.jsonl"), "--", PY, path]
        r = subprocess.run(cmd, input=b"in\n", capture_output=True, env=env, cwd=d, timeout=300)
        err = r.stderr
        if mode == "run":
            err = err.split(b"\nwp-autotrace:\n")[0]
            err = b"\n".join(l for l in err.split(b"\n") if not l.startswith(b"wp-autotrace: logging to"))
            err = err.rstrip(b"\n") + (b"\n" if err.strip() else b"")
        runs[mode] = (r.returncode, norm(r.stdout), norm(err).replace(b"/on.jsonl", b"").replace(b"/run.jsonl", b""))
    same = runs["off"] == runs["on"]
    same_run = runs["off"] == runs["run"]
    print(f"{name:16s} off={runs['off'][0]} on={runs['on'][0]} run={runs['run'][0]} "
          f"{'same' if same else 'DIFF(on)'} {'same' if same_run else 'DIFF(run)'}")
    if not (same and same_run):
        bad += 1
        for m in ("off", "on", "run"):
            print("   ", m, runs[m])
sys.exit(1 if bad else 0)
