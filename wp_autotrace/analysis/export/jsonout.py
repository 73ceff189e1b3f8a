"""A JSON document written as it is made, in bounded pieces: the exports' writer.

An export of a big log is as big as the log or bigger; made whole in memory (the dicts, then one
json.dumps string) it held about ten times the log's size. The exports instead hand each part (a
span, a trace event) to a Chunks as soon as it is complete; Chunks joins the parts' text and
passes it to the output about every CHUNK_CHARS, so memory holds one chunk, never the document.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Callable

CHUNK_CHARS = 1 << 20  # text handed to the output at once: few writes, little held


def dumps(value: Any) -> str:
    # allow_nan=False: the reader has already made every number finite; never write NaN.
    return json.dumps(value, allow_nan=False, default=str)


class Chunks:
    """Text for write(), gathered into chunks of about CHUNK_CHARS."""

    def __init__(self, write: Callable[[str], Any]) -> None:
        self.write = write
        self.parts: list[str] = []
        self.size = 0

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        if self.size >= CHUNK_CHARS:
            self.flush()

    def array(self, values: Iterable[Any]) -> int:
        """A JSON array of values, each encoded as it comes; how many there were."""
        self.add("[")
        n = 0
        for value in values:
            self.add(", " + dumps(value) if n else dumps(value))
            n += 1
        self.add("]")
        return n

    def flush(self) -> None:
        if self.parts:
            text = "".join(self.parts)
            self.parts, self.size = [], 0
            self.write(text)
