"""A stand-in for an out-of-tree device backend such as torch_npu.

Like torch_npu it is registered under the ``torch.backends`` entry-point
group (see the .dist-info folder beside it), so ``import torch`` auto-loads
it; like torch_npu it sets TORCH_WARM_POOL=0 for its whole process, and its
``_inductor`` package calls ``AsyncCompile.warm_pool()`` at import anyway.
Put this folder on PYTHONPATH to activate it; nothing to install.
"""

import os

os.environ["TORCH_WARM_POOL"] = "0"


def _autoload() -> None:
    """Called by torch's _import_device_backends() during ``import torch``."""
    import wp_standin_backend._inductor  # noqa: F401
