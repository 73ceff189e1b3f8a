"""The host side: what runs inside every traced process (see common/__init__.py for the layer rule)."""

import os

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any

_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def imported_by_tracer(frame: "Any") -> bool:
    """Whether the import being served (frame: the finder's caller, in importlib) is a statement in
    this package's code: its finders then look a top-level module up where the cwd cannot shadow it."""
    while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename.startswith(_OWN_DIR)
