"""pytorch/pytorch#196972 (and pytorch/torchtitan#3944): the compile sidecar dies while it starts; "a single
sidecar crash poisons every subsequent torch.compile call in that process" ("a long pytest session", where "a
stale typing backport installed in the test venv shadowed the stdlib typing"). On torch 2.15 each later compile
raises "Attempting to use a closed pool"; on torch 2.13 each waits for the pool's ready job, 120 s per compile,
then raises TimeoutError.

Run under pytest: three tests that each compile (their first Triton kernel: AsyncCompile.wait_pool_ready()).
A vendored folder holding the stale backport is put first on sys.path, as a conftest might; the main process is
unaffected, but the sidecar gets sys.path as PYTHONPATH. The wait is bounded (READY_S) for the bench.
    python -m pytest -q -p no:cacheprovider bench/users/sidecar_start_fails.py
"""
import os
import sys

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402,F401
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "stale_site"))
READY_S = 8  # torch's default is 120 s per compile


def compile_once() -> None:
    AsyncCompile.wait_pool_ready(timeout=READY_S)  # first Triton kernel


def test_model_forward() -> None:
    compile_once()


def test_model_backward() -> None:
    compile_once()


def test_generate() -> None:
    compile_once()
