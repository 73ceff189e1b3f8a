"""pytorch/FBGEMM#5930 / #6009 (CI OOM): "TorchInductor defaults its async C++ compile-worker pool to one worker
per vCPU, so the compile=True TBE tests spike peak memory past 32GB" -- the test step dies with no error.
The user's fix: TORCHINDUCTOR_COMPILE_THREADS=1 on the 'Test with PyTest' step. And pytorch/pytorch#193647 /
Lightning-AI/lightning-thunder#837: under pytest-xdist, each xdist worker makes its own pool (ps shows
compile_worker --workers=32 under several --parent pids).

A test module, run by pytest (serially, or with -n 2): two compile tests, as in the TBE suite, and two that
do not compile, ordered so that pytest-xdist's load scheduling gives each of 2 xdist workers one compile
test. On CPU the pool comes with a GPU host's first Triton kernel; the stand-in is
AsyncCompile.wait_pool_ready() in the compile tests.
    python -m pytest -q -p no:cacheprovider bench/users/ci_compile_tests.py          # serial
    python -m pytest -q -p no:cacheprovider -n 2 bench/users/ci_compile_tests.py     # xdist
"""
import os
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

AFTER_S = 2  # each later test's own work


def _compiled(x: torch.Tensor) -> torch.Tensor:
    AsyncCompile.wait_pool_ready()  # first Triton kernel
    return torch.compile(lambda t: (t * 3).relu() + 1)(x)


def test_backward_adagrad_compile() -> None:
    assert _compiled(torch.ones(4)).sum() == 16


def test_eager_reference() -> None:
    time.sleep(AFTER_S)
    assert torch.ones(3).sum() == 3


def test_eager_shapes() -> None:
    time.sleep(AFTER_S)
    assert torch.zeros(2, 2).shape == (2, 2)


def test_forward_compile() -> None:
    assert _compiled(torch.zeros(4)).sum() == 4
