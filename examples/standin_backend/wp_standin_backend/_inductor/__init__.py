from torch._inductor.async_compile import AsyncCompile

AsyncCompile.warm_pool()  # as torch_npu/_inductor/__init__.py does, ignoring TORCH_WARM_POOL
