"""Formatting shared by findings and the text report: pids, sizes, call sites, escapes."""

from __future__ import annotations

import os
import textwrap
from typing import Any

from ...common.vocab import IDLE_UNREAD_SHARE

# Columns of the text report when stdout is not a terminal (a pipe, a file, CI's log).
WIDTH = 100
# Narrower than this, wrapping helps nobody: lines are broken at this width at least.
MIN_WIDTH = 40

MIB = 2**20  # bytes in a MiB: every figure is shown in binary units, as labelled

# Pids named in a finding's text; the rest are in --json.
TEXT_PIDS = 6
# What a pool's idle span after busy_until follows (derive/pools.py's idle_after), in words: a pool that ran no job
# (torch 2.1-2.3's import-time warm on a CPU host) idled from its ready, not "after its last job".
# A pool handed jobs whose ends no record bounds (derive/pools.py idle_known): its idle time, told as unknown.
UNKNOWN_IDLE = "not known (its worker recorded fewer jobs than it was handed: their ends are not known)"
IDLE_AFTER_WORDS = {"job": "its last job", "ready": "it was ready", "serving": "its sidecar started serving"}


# C0 controls, DEL and C1 controls (ESC included) shown as \xNN: never sent to a terminal.
_C0_C1 = (*range(0x20), *range(0x7F, 0xA0))
# Invisible and bidirectional format characters, shown as \uNNNN: a U+202E (right-to-left
# override) or U+2066..U+2069 (isolates) in an argv reorders what the terminal shows after it,
# U+200B..U+200F (zero-width, marks), U+2060..U+2064 and U+FEFF are invisible, U+2028/U+2029
# break lines. Unicode's Cf characters of these blocks and the line/paragraph separators.
_INVISIBLE = (0x00AD, 0x061C, 0x180E, *range(0x200B, 0x2010), *range(0x2028, 0x202F), *range(0x2060, 0x2065),
              *range(0x2066, 0x2070), 0xFEFF, *range(0xFFF9, 0xFFFC))
_CONTROL = {c: f"\\x{c:02x}" for c in _C0_C1} | {c: f"\\u{c:04x}" for c in _INVISIBLE}


def escape(text: str) -> str:
    """text with every control character (C0, DEL, C1) written as \\xNN, every invisible or
    bidirectional format character (U+202E, U+2066..U+2069, U+200B..U+200F, ...) as \\uNNNN."""
    return text.translate(_CONTROL)


def plural(n: int, word: str) -> str:
    """'1 worker', '2 workers', '2 processes': n and the word, plural unless n is 1."""
    return f"{n} {word}{'' if n == 1 else 'es' if word.endswith('s') else 's'}"


def pid_text(pids: Any, limit: int = TEXT_PIDS) -> str:
    """'1, 2, 3' or '1, 2, 3, ... (40 in all)'."""
    items = sorted(set(pids))
    text = ", ".join(map(str, items[:limit]))
    return text + (f", ... ({len(items)} in all)" if len(items) > limit else "")


def seconds_text(x: Any) -> str:
    """Seconds from the first record, for sentences: '12.3 s' ('?' when unknown)."""
    return f"{x:.1f} s" if isinstance(x, (int, float)) else "?"


def sidecar_name(pid: Any) -> str:
    """'sidecar PID', or where the log saw no sidecar of the pool (warm_pool interrupted before it
    started one, or the sidecar untraced) 'sidecar not seen': never 'sidecar None'."""
    return f"sidecar {pid}" if pid is not None else "sidecar not seen"


def pool_name(pool: dict[str, Any]) -> str:
    """A pool as its processes: 'sidecar 12 + 2 workers'; a fork/spawn pool (no sidecar, its workers are its
    creator's children): '2 forked workers, no sidecar'."""
    n = len(pool.get("worker_pids") or ())
    if pool.get("kind") == "autotune":  # its creator starts them itself, one per device, again after a kill
        return f"{n} autotune subprocess{'es' if n != 1 else ''} in all, no sidecar"
    if pool.get("kind") == "quack":  # quack's precompile Popens them itself
        return f"{n} quack compile worker{'s' if n != 1 else ''}, no sidecar"
    if pool.get("kind") == "executor":
        how = {"fork": "forked ", "spawn": "spawned "}.get(pool.get("start_method") or "", "")
        return f"{n} {how}worker{'s' if n != 1 else ''}, no sidecar"
    return sidecar_name(pool.get("sidecar_pid")) + (f" + {n} worker{'s' if n != 1 else ''}" if n else "")


def cgroup_text(path: str | None, rec: dict[str, Any]) -> str:
    """A cgroup record's cgroup, named with the one above it that sets its limit where that is not itself
    (`limit_path`): "/slurm/job_7, above its own /slurm/job_7/step_0"."""
    at = rec.get("limit_path")
    return f"{at}, above its own {path}" if isinstance(at, str) else str(path)


def size_text(n: int) -> str:
    """Bytes for people, in binary units as labelled: '600 MiB', '65.6 GiB' (--json keeps bytes)."""
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def mib_s_text(mib_s: float) -> str:
    """Memory held over time for people: '230 MiB·s', '11.0 GiB·s' (--json: `*_mib_s`, MiB x seconds)."""
    return f"{mib_s / 1024:.1f} GiB·s" if mib_s >= 1024 else f"{mib_s:.0f} MiB·s"


def wrap(text: str, width: int | None, indent: str = "  ") -> list[str]:
    """One bullet or finding line wrapped to width (None: not wrapped), continuation lines indented. A word
    longer than the width (a long path, a test id) stays whole on a line of its own, longer than the width: a
    path split across lines can be neither copied nor searched for."""
    if width is None:
        return [text]
    return textwrap.wrap(text, width=max(width, MIN_WIDTH), subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=False) or [""]


def site(frame: dict[str, Any] | None) -> str:
    """Where a call came from, for people: 'dist version: rel:line (func)' when known."""
    if not frame:
        return "?"
    # The path as the program named it can hold `..` (`python w/../my2.py`): shown normalised (--json keeps it).
    where = frame.get("rel") or os.path.normpath(frame["file"])
    text = f"{where}:{frame.get('line')} ({frame.get('func') or '?'})"
    if frame.get("dist"):
        text = f"{frame['dist']} {frame.get('dist_version') or ''}".rstrip() + ": " + text
    if frame.get("src"):
        text += f' "{frame["src"][:60]}"'
    return text


def skipped_line(skipped: dict[str, int]) -> str:
    """One line summarising what was skipped, or '' if nothing was."""
    if not skipped:
        return ""
    parts = ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items()))
    return f"skipped {sum(skipped.values())} line(s): {parts}"


def error_words(error: str) -> str:
    """A call's recorded error for people: 'KeyboardInterrupt: ' (SIGINT: Ctrl-C, or kill -INT) ->
    'Ctrl-C (KeyboardInterrupt)'; another keeps its type and message, with no empty ': ' left over."""
    text = error.strip().rstrip(":").strip()
    if text == "KeyboardInterrupt":
        return "Ctrl-C (KeyboardInterrupt)"
    return text


def status_words(code: int) -> str:
    """A program's end from its status (`run`'s wait: -N for signal N), in the words a user uses: 'exited with
    code 3', 'stopped with Ctrl-C (SIGINT)', 'stopped by SIGTERM (a time limit, a scheduler or kill)', else
    'killed by signal N'."""
    if code >= 0:
        return f"exited with code {code}"
    return {2: "stopped with Ctrl-C (SIGINT)", 15: "stopped by SIGTERM (a time limit, a scheduler or kill)"}.get(
        -code, f"killed by signal {-code}")


def uncaught_words(error: str) -> str:
    """The uncaught exception that ended a program (its process_exit's `error`, 'Type: message'), in a line:
    'an uncaught RuntimeError: boom'; a KeyboardInterrupt says what raises one. Its first line, cut at 120."""
    text = error.splitlines()[0] if error.strip() else error
    text = text if len(text) <= 120 else text[:119] + "…"
    if text.split(":", 1)[0] == "KeyboardInterrupt":
        return "an uncaught KeyboardInterrupt (Ctrl-C, or a SIGINT)"
    # an exception raised with no message ("TimeoutError: "): its type alone, never "TimeoutError: ." in a sentence
    return f"an uncaught {text.rstrip().removesuffix(':')}"


def gap_words(a: str, b: str, s: float, first: bool) -> str:
    """An idle gap inside a pool's life (derive/gaps.idle_gaps), as the idle-pool finding tells it: its
    seconds and its ends, from (its ready | a job's end) at a to (its first | its next) job at b."""
    return (f"{s:.1f} s between its ready at {a} and its first job at {b}" if first
            else f"{s:.1f} s between a job's end at {a} and its next job at {b}")


def idle_mib_s_text(mib_s: float, unread_s: float, total_s: float) -> str:
    """An idle MiB·s for people: memory at once integrated over total_s seconds, of which unread_s had a process
    alive and unread (counted as nothing): past IDLE_UNREAD_SHARE of them, 'at least 7.4 GiB·s (read for 37 of
    157 s)', a floor, never a figure carried over the unread seconds."""
    if total_s > 0 and unread_s > IDLE_UNREAD_SHARE * total_s:
        return f"at least {mib_s_text(mib_s)} (read for {total_s - unread_s:.0f} of {total_s:.0f} s)"
    return mib_s_text(mib_s)


def costs_idle_text(costs: dict[str, Any]) -> str:
    """Every pool's idle MiB·s together (report's `costs`), as idle_mib_s_text says one."""
    return idle_mib_s_text(costs["idle_mib_s"], costs.get("idle_unread_s") or 0.0, costs["idle_s"])
