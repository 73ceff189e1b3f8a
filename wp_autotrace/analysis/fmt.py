"""Formatting shared by findings and the text report: pids, sizes, call sites, escapes."""

from __future__ import annotations

from typing import Any

# Pids named in a finding's text; the rest are in --json.
TEXT_PIDS = 6


# C0 controls, DEL and C1 controls (ESC included) shown as \xNN: never sent to a terminal.
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}


def escape(text: str) -> str:
    """text with every control character (C0, DEL, C1) written as \\xNN."""
    return text.translate(_CONTROL)



def pid_text(pids: Any, limit: int = TEXT_PIDS) -> str:
    """'1, 2, 3' or '1, 2, 3, ... (40 in all)'."""
    items = sorted(set(pids))
    text = ", ".join(map(str, items[:limit]))
    return text + (f", ... ({len(items)} in all)" if len(items) > limit else "")


def size_text(n: int) -> str:
    """Bytes for people, in binary units as labelled: '600 MiB', '65.6 GiB' (--json keeps bytes)."""
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def mib_s_text(mib_s: float) -> str:
    """Memory held over time for people: '230 MiB·s', '11.0 GiB·s' (--json: `*_mib_s`, MiB x seconds)."""
    return f"{mib_s / 1024:.1f} GiB·s" if mib_s >= 1024 else f"{mib_s:.0f} MiB·s"


def site(frame: dict[str, Any] | None) -> str:
    """Where a call came from, for people: 'dist version: rel:line (func)' when known."""
    if not frame:
        return "?"
    where = frame.get("rel") or frame["file"]
    text = f"{where}:{frame.get('line')} ({frame.get('func') or '?'})"
    if frame.get("dist"):
        text = f"{frame['dist']} {frame.get('dist_version') or ''}".rstrip() + ": " + text
    if frame.get("src"):
        text += f' "{frame["src"][:60]}"'
    return text
