"""A serving library's plugin loader that asks for one compile thread through the environment after torch is
imported (its import of torch came first): torch read TORCHINDUCTOR_COMPILE_THREADS into
torch._inductor.config.compile_threads when that config loaded, so this assignment reaches no pool."""
import os

import torch  # noqa: F401  (the library imports torch at its top, as a serving library does)


def load_general_plugins() -> None:
    # One compile thread, for the library's own reasons (fewer processes), asked for the way a shell would.
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
