"""The caller's stack and its attribution, cached per code object: a Recorder's (recorder.Probes) Stacks.

A traced call records the frames above it (ours and importlib's left out) and its caller, the innermost
frame outside torch and the standard library, attributed to its installed distribution (dists.py). The
walk is the hot part of a traced call: frame kinds are cached per code object, and a call site's frames,
caller and their JSON per (code, offset) key.
"""

from __future__ import annotations

import os
import sys

from .dists import attribute
from .jsonline import c_encoder

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any

encode_json = c_encoder()
_getframe = sys._getframe  # bound once: a user may trace sys._getframe itself

# How a stack frame counts: left out, library (torch, stdlib), or user/plugin code.
_SKIP, _LIBRARY, USER = 0, 1, 2
# Code objects whose kind is remembered; past this the cache starts over (generated code).
MAX_CACHED_CODES = 20000
# Distinct call sites whose stack is kept encoded (a traced target has a handful).
MAX_CACHED_STACKS = 1024

OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB_DIR = os.path.dirname(os.__file__) + os.sep


class Stacks:
    """The caller's stack and its attribution, cached per code object. A Probes holds one (probes.stacks);
    its wrappers bind the methods they call (stack, call_site) once, when the wrapper is made, so a traced
    call pays no more lookups than when Stacks was Probes' base class (BENCHMARKS.md, "Probes has its
    Stacks"). Not thread-safe by locks: the caches are dicts and lists whose single operations are atomic,
    and a lost entry is only made again."""

    def __init__(self, stack_limit: int) -> None:
        self.stack_limit = stack_limit  # frames kept per stack (a call's record)
        self._torch_dir: str | None = None  # "" once torch is known to have no file
        self._kinds: dict[int, int] = {}  # id(code) -> kind; the codes kept alive in _codes
        self._codes: list[Any] = []
        self._generation = 0  # counts forget_codes calls
        # (kept frames' code ids and lines, caller's) -> (frames, caller, their JSON): see stack
        self._stacks: dict[Any, tuple[list[dict[str, Any]], dict[str, Any] | None, str]] = {}
        self._skip_dirs: tuple[str, ...] = (OWN_DIR,)

    def _frame_kind(self, code: Any) -> int:
        """_SKIP (ours, importlib's), _LIBRARY (torch, stdlib) or USER, cached per code object.

        Keyed by id(code), with the code object kept alive in _codes so the id
        cannot be reused while cached: hashing a code object hashes its
        constants and names (up to ~0.1 µs a frame, and a deep stack has 60).
        """
        filename = code.co_filename
        if filename.startswith(self._skip_dirs) or filename.startswith("<frozen importlib"):
            kind = _SKIP
        elif (filename.startswith("<") or (self._torch_dir and filename.startswith(self._torch_dir))
              or (filename.startswith(_STDLIB_DIR) and "-packages" not in filename)):
            kind = _LIBRARY
        else:
            kind = USER
        if len(self._kinds) > MAX_CACHED_CODES:
            self.forget_codes()
        self._kinds[id(code)] = kind
        self._codes.append(code)
        return kind

    def forget_codes(self) -> None:
        """Clear the kind cache and, with it, every cached stack (their keys are code ids)."""
        self._kinds.clear()
        self._codes.clear()
        self._stacks.clear()
        self._generation += 1

    def _learn_dirs(self) -> None:
        """Note torch's folder once it is imported (the cache depends on it)."""
        modules = sys.modules
        if self._torch_dir is None and "torch" in modules:
            path = getattr(modules["torch"], "__file__", None)
            self._torch_dir = os.path.dirname(path) + os.sep if path else ""
            self.forget_codes()

    def capture_stack(self) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """The caller's frames (innermost last, ours and importlib's left out),
        and the innermost frame outside torch and the stdlib."""
        frames, caller, _ = self.stack()
        return frames, caller

    def stack(self, depth: int = 1) -> tuple[list[dict[str, Any]], dict[str, Any] | None, str]:
        """capture_stack's (frames, caller) and their JSON members ('"stack":[...],"caller":{...}').

        The walk notes only (code id, f_lasti) of each kept frame and of the caller: f_lineno would scan
        the code's line table (0.1 us a frame, more in a long function), and one offset of one code is one
        line. The frames (with f_lineno), the caller's attribution (dists.attribute) and their encoding
        are made once per such key and then reused. The cached objects are shared, never to be changed.
        depth: where the walk starts (sys._getframe's): 2 from a wrapper that calls this itself skips its
        own frame, which would be left out anyway, without making a frame object of it.
        """
        if self._torch_dir is None:
            self._learn_dirs()
        kinds = self._kinds
        limit = 2 * self.stack_limit  # kept holds two entries a frame
        kept: list[Any] = []
        caller: Any = None
        first: Any
        try:
            first = frame = _getframe(depth)
        except ValueError:  # no frame there: the wrapper called from C (an atexit callback, a new thread)
            first = frame = None
        while frame is not None and len(kept) < limit:
            code = frame.f_code
            kind = kinds.get(code_id := id(code))
            if kind is None:
                kind = self._frame_kind(code)
            if kind:  # not _SKIP
                kept.append(code_id)  # two appends: no tuple made per frame
                kept.append(frame.f_lasti)
                if caller is None and kind == USER:
                    caller = frame
            frame = frame.f_back
        # The caller among the kept frames is named by them (the first USER one): the key is those alone.
        key: Any = tuple(kept)
        while caller is None and frame is not None:  # past the kept frames: only the caller is sought
            code = frame.f_code
            kind = kinds.get(id(code))
            if kind == USER or (kind is None and self._frame_kind(code) == USER):
                caller = frame
                key = (key, id(code), frame.f_lasti)
            frame = frame.f_back
        found = self._stacks.get(key)
        if found is None:
            generation = self._generation
            found = self._make_stack(first, caller, len(kept) // 2)
            if len(self._stacks) >= MAX_CACHED_STACKS:
                self._stacks.clear()
            if generation == self._generation:  # else some key ids are no longer held in _codes
                self._stacks[key] = found
        return found

    def call_site(self) -> tuple[Any, int] | None:
        """The innermost user frame above the caller as (code, line), or None: a walk of cached frame kinds,
        nothing attributed or encoded (a counted target's last caller; process_exit attributes it once)."""
        if self._torch_dir is None:
            self._learn_dirs()
        kinds = self._kinds
        frame: Any = _getframe(2)  # the caller's caller: above the wrapper that asks
        while frame is not None and (kinds.get(id(frame.f_code)) or self._frame_kind(frame.f_code)) != USER:
            frame = frame.f_back
        return (frame.f_code, frame.f_lineno) if frame is not None else None

    def _make_stack(self, frame: Any, caller_frame: Any, count: int
                    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None, str]:
        """The frames and caller of one walk, attributed and encoded (a cache miss of stack)."""
        kinds = self._kinds
        frames: list[dict[str, Any]] = []
        while frame is not None and len(frames) < count:
            code = frame.f_code
            kind = kinds.get(id(code))
            if kind if kind is not None else self._frame_kind(code):
                frames.append({"file": code.co_filename, "line": frame.f_lineno, "func": code.co_name})
            frame = frame.f_back
        frames.reverse()
        caller = None
        if caller_frame is not None:
            code = caller_frame.f_code
            caller = attribute({"file": code.co_filename, "line": caller_frame.f_lineno, "func": code.co_name})
        return frames, caller, f'"stack":{encode_json(frames)},"caller":{encode_json(caller)}'
