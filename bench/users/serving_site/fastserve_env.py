"""A serving library's environment override, as vLLM's vllm/env_override.py (before vllm-project/vllm#53892) does it:
a plain assignment at import, so a value the user exported is overwritten before torch reads it."""
import os

# One compile thread: the library's default for its own reasons (a debugger, fewer processes), set unconditionally.
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
