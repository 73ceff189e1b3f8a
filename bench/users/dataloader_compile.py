"""pytorch/pytorch#97992 "torch.compile not compatible with multiprocessing pool": the user compiles a model
inside a DataLoader transform (the workers are daemonic multiprocessing processes); on torch 2.0 that raised
"daemonic processes are not allowed to have children". On 2.13 the sidecar is started with Popen, so it
works -- and each DataLoader worker makes its own compile pool. What does that cost, and what is left?

On CPU the pool comes with the first Triton kernel on a GPU host; the stand-in is
AsyncCompile.wait_pool_ready() in the worker. 2 DataLoader workers x 2 compile workers; the main process
trains on for TRAIN_S after the epoch. Standalone: `python bench/users/dataloader_compile.py`.
"""
import os
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

TRAIN_S = 5


class Encoded(Dataset):
    """Encodes each item with a compiled encoder, compiled lazily in the worker (as in the report)."""

    def __init__(self) -> None:
        self.encoder = None

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.encoder is None:
            from torch._inductor.async_compile import AsyncCompile
            AsyncCompile.wait_pool_ready()  # first Triton kernel
            self.encoder = torch.compile(lambda x: (x * 2).sin() + 1)
        return self.encoder(torch.full((4,), float(i)))


if __name__ == "__main__":
    loader = DataLoader(Encoded(), batch_size=2, num_workers=2)
    total = sum(float(b.sum()) for b in loader)
    print(f"epoch done: {total:.2f}", flush=True)
    time.sleep(TRAIN_S)  # the training loop goes on
