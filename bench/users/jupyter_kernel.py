"""A Jupyter kernel that compiles, driven the way JupyterLab drives it (jupyter_client), then interrupted and restarted.

Public reports: pytorch/pytorch#123329 ("when I use torch.compile, it will use AsyncCompile.warm_pool() to create many
sub-processes, why it is not recycled until the program stops": in a notebook the program is the kernel, which lives
until the user restarts it), pytorch/pytorch#116379 ("press ctrl-c, it prints hundreds lines of" tracebacks from the
compile pool's processes) and crowsonkb/k-diffusion#81 ("clean exit ... using ctrl+c is no longer possible ... they do
not exit and become defunct"). No report found is Jupyter's own; the kind is: a long-lived interactive process whose
Ctrl-C (the kernel's Interrupt) and Restart reach the compile pool's processes too, because jupyter_client signals the
kernel's whole process group (LocalProvisioner.send_signal: os.killpg), and the pool's sidecar and workers are in it.

The user asks: after my cell ran, why do 3 more python processes stay (and what do they hold)? What did Interrupt do
to them (does the next cell still compile)? Does Restart leave them behind?

Flow: start a kernel (this venv's python); cell 1 makes the pool the way a GPU host's first Triton kernel does
(AsyncCompile.wait_pool_ready()) and compiles a small function; the pool stays while the notebook sits idle; cell 2
sends a long compile job to the pool and is interrupted 2 s later (KernelManager.interrupt_kernel: SIGINT to the
group; torch's sidecar and workers ignore SIGINT, so the job runs on); cell 3 compiles through the pool again; then
Restart (restart_kernel(now=False): an interrupt, a shutdown_request, on which ipykernel SIGTERMs each child of its
group, then SIGTERM/SIGKILL to the group after half of shutdown_wait_time); the new kernel is shut down. Every step
prints what psutil sees (the independent reading); at the end anything of the first kernel's tree still alive is
printed and ended by pid. Bench only: jupyter_client and ipykernel are never runtime dependencies.
Standalone: `python bench/users/jupyter_kernel.py`.
"""
import os
import sys
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import psutil  # noqa: E402
from jupyter_client.manager import KernelManager  # noqa: E402

IDLE_S = 6  # the notebook sits idle between cells
CELL_1 = """
import os, time, torch
from torch._inductor.async_compile import AsyncCompile
AsyncCompile.wait_pool_ready()  # first Triton kernel
f = torch.compile(lambda x: (x.sin() + 1).relu())
print("cell 1 compiled:", f(torch.ones(4)).tolist(), "sidecar", AsyncCompile.process_pool().process.pid, flush=True)
"""
CELL_2 = """
print("cell 2: a long compile in flight", flush=True)
AsyncCompile.process_pool().submit(time.sleep, 30).result()
"""
CELL_3 = """
t0 = time.monotonic()
print("cell 3: pool answered from", AsyncCompile.process_pool().submit(os.getpid).result(timeout=60),
      f"after {time.monotonic() - t0:.1f} s", flush=True)
g = torch.compile(lambda x: (x * 3).cos())
print("cell 3 compiled:", g(torch.ones(2)).tolist(), flush=True)
"""


def tree(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def show(label: str, procs: list[psutil.Process]) -> None:
    rows = []
    for p in procs:
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                rows.append(f"{p.pid}(zombie)")
                continue
            rows.append(f"{p.pid}(ppid {p.ppid()}, {p.num_threads()} thr, rss {p.memory_info().rss / 2**20:.0f} MiB)")
        except psutil.Error:
            rows.append(f"{p.pid}(gone)")
    print(f"[{time.monotonic() - T0:6.1f} s] {label}: {', '.join(rows) or 'none'}", flush=True)


def run_cell(kc, code: str, timeout: float, interrupt_after: float | None = None, km=None) -> str:
    """Sends one cell and waits for its reply; prints the cell's output. Interrupts it (as the Interrupt button
    does) `interrupt_after` seconds after its first output."""
    msg_id = kc.execute(code)
    deadline, status, first_out = time.monotonic() + timeout, "timeout", None
    while time.monotonic() < deadline:
        if interrupt_after is not None and first_out is not None and time.monotonic() > first_out + interrupt_after:
            print(f"[{time.monotonic() - T0:6.1f} s] Interrupt (SIGINT to the kernel's process group)", flush=True)
            km.interrupt_kernel()
            interrupt_after = None
        try:
            msg = kc.get_iopub_msg(timeout=0.5)
        except Exception:  # noqa: BLE001 - queue.Empty: nothing yet
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            first_out = first_out or time.monotonic()
            print("   kernel:", content["text"].rstrip(), flush=True)
        elif kind == "error":
            print("   kernel error:", content["ename"], content["evalue"][:200], flush=True)
            status = "error"
        elif kind == "status" and content["execution_state"] == "idle":
            status = "ok" if status == "timeout" else status
            break
    return status


T0 = time.monotonic()
km = KernelManager(kernel_name="python3")
km.kernel_spec.argv[0] = sys.executable  # this venv's python, traced like the rest
km.start_kernel()
kc = km.client()
kc.start_channels()
kc.wait_for_ready(timeout=120)
kernel = km.provisioner.process.pid
print(f"kernel {kernel} started (its own process group)", flush=True)
try:
    t = time.monotonic()
    print("cell 1:", run_cell(kc, CELL_1, 300), f"in {time.monotonic() - t:.1f} s", flush=True)
    first_tree = tree(kernel)
    show("after cell 1, the kernel's children", first_tree)
    time.sleep(IDLE_S)
    show(f"the notebook idle {IDLE_S} s", tree(kernel))
    t = time.monotonic()
    print("cell 2:", run_cell(kc, CELL_2, 120, interrupt_after=2.0, km=km), f"in {time.monotonic() - t:.1f} s",
          flush=True)
    time.sleep(1)
    show("after the interrupt", first_tree + [p for p in tree(kernel) if p not in first_tree])
    first_tree += [p for p in tree(kernel) if p not in first_tree]
    t = time.monotonic()
    print("cell 3:", run_cell(kc, CELL_3, 240), f"in {time.monotonic() - t:.1f} s", flush=True)
    first_tree += [p for p in tree(kernel) if p not in first_tree]
    show("after cell 3", first_tree)
    t = time.monotonic()
    print(f"[{time.monotonic() - T0:6.1f} s] Restart (restart_kernel(now=False))", flush=True)
    km.restart_kernel(now=False)
    print(f"restart took {time.monotonic() - t:.1f} s; new kernel {km.provisioner.process.pid}", flush=True)
    kc.wait_for_ready(timeout=120)
    time.sleep(3)
    show("the first kernel and its tree after the restart",
         ([psutil.Process(kernel)] if psutil.pid_exists(kernel) else []) + first_tree)
finally:
    kc.stop_channels()
    km.shutdown_kernel(now=False)
    left = [p for p in first_tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    show("left of the first kernel's tree at the end (ended now)", left)
    for p in left:
        try:
            p.kill()
        except psutil.Error:
            pass
