"""pytorch/pytorch#115654 "Robust ... Autotuning in subprocesses" (and pytorch/helion#2111, "benchmarking can
sometimes block forever, hanging CI until the 6 hour timeout"): max-autotune benchmarks each candidate kernel
in a subprocess (TORCHINDUCTOR_AUTOTUNE_IN_SUBPROC=1); a candidate that hangs is given a timeout, then its
subprocess is SIGKILLed and a new one started. The user asks: which process hung, for how long, what was
killed, and did autotuning go on?

Stand-ins on torch 2.13 CPU: torch's own TuningProcess (the subprocess max-autotune uses, one per device);
a benchmark that hangs is a sleep, the timeout is short (torch's default is 120 s). Standalone:
`python bench/users/autotune_subproc.py`.
"""
import functools
import time

import torch  # noqa: F401
from torch._inductor.autotune_process import TuningProcess

TIMEOUT_S = 4  # torch: 120 s

t0 = time.monotonic()
proc = TuningProcess(device=None)
print(f"autotune subprocess {proc.process.pid} started", flush=True)
proc.put(functools.partial(time.sleep, 60))  # a candidate whose benchmark hangs
try:
    proc.get(timeout=TIMEOUT_S)
except TimeoutError as e:
    print(f"{e} after {time.monotonic() - t0:.1f} s: it was SIGKILLed", flush=True)
proc.put(functools.partial(sum, [1, 2, 3]))  # the next candidate: a new subprocess starts
print(f"autotune subprocess {proc.process.pid} started for the next candidate", flush=True)
print(f"next candidate's result {proc.get(timeout=60)} at {time.monotonic() - t0:.1f} s", flush=True)
proc.shutdown()
print("autotuning done", flush=True)
