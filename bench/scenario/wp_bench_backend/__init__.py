"""A stand-in device backend whose warm_pool chain stops after two levels.

Registered under ``torch.backends`` (the .dist-info beside it), so ``import
torch`` auto-loads it, like torch_npu. Its ``_inductor`` package calls
``AsyncCompile.warm_pool()`` at import only while WP_BENCH_WARM_DEPTH < 2 and
bumps that counter first; compile sidecars inherit os.environ, so the run is
main -> sidecar 1 -> sidecar 2 and then it stops: warm_pool is called in
exactly two processes (main and sidecar 1). Put this folder on PYTHONPATH.
"""

import os

os.environ["TORCH_WARM_POOL"] = "0"


def _autoload() -> None:
    """Called by torch's _import_device_backends() during ``import torch``."""
    import wp_bench_backend._inductor  # noqa: F401
