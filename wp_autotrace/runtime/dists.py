"""Which installed distribution a caller's file belongs to, recorded at trace time.

A report read on another machine cannot look this up, so a ``caller`` frame
gets ``dist``, ``dist_version`` and ``rel`` (the path below its sys.path
folder, e.g. ``torch_npu/_inductor/__init__.py``) when a target is called.
Nothing here runs at start-up: the first lookup per file costs a folder
listing and one metadata header read per top-level package (cached), later
ones a dict lookup. importlib.metadata is used only for a package not named
like its project (yaml from PyYAML): its top_level.txt or RECORD. A
``<string>`` caller gets ``src``: the first line of the ``-c`` code this
interpreter was started with.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any

# Files remembered; past this the cache starts over (long-lived processes with generated code).
MAX_CACHED_FILES = 4096
# Longest `src` kept: one line of -c code is enough to name it.
MAX_SRC = 200
_METADATA_SUFFIXES = (".dist-info", ".egg-info")
# A local folder's URL in direct_url.json (PEP 610): file:// and an absolute path.
_FILE_URL = "file://"

_MISSING: Any = object()
_by_file: dict[str, dict[str, str] | None] = {}
# root folder -> {normalised project name: metadata folder name}
_listings: dict[str, dict[str, str]] = {}
# (root, top-level name) -> (dist name, version), or None
_by_top: dict[tuple[str, str], tuple[str, str] | None] = {}
# root folder -> {top-level name: (dist name, version)}, from every distribution there
_scanned: dict[str, dict[str, tuple[str, str]]] = {}


def attribute(caller: dict[str, Any] | None) -> dict[str, Any] | None:
    """The caller frame with dist/dist_version/rel (or src) added; never raises."""
    if caller is None:
        return None
    file = caller.get("file")
    if not isinstance(file, str):
        return caller
    extra = _by_file.get(file, _MISSING)
    if extra is _MISSING:
        try:
            extra = lookup(file)
        except Exception:
            extra = None  # unreadable metadata: the frame keeps its full path
        if len(_by_file) >= MAX_CACHED_FILES:
            _by_file.clear()
        _by_file[file] = extra
    return {**caller, **extra} if extra else caller


def lookup(file: str) -> dict[str, str] | None:
    """{dist, dist_version, rel} for an installed file, {src} for -c code, or None."""
    if file.startswith("<"):
        src = command_source() if file == "<string>" else None
        return {"src": src} if src else None
    path = os.path.abspath(file)
    root = _root_of(path)
    found = None
    if root is not None:
        rel = path[len(root):].lstrip(os.sep)
        top = rel.split(os.sep, 1)[0]
        found = dist_for(root, top[:-3] if top.endswith(".py") else top)
    if found is None:
        # An editable install lives in its checkout, outside site-packages.
        root, found = next(((d, f) for d, f in _editable() if path.startswith(d + os.sep)), (None, None))
        if root is None or found is None:
            return None
        rel = path[len(root):].lstrip(os.sep)
        if not _in_package(rel, found[0]):
            return None  # a checkout also holds scripts, examples, tests: not the installed package
    return {"dist": found[0], "dist_version": found[1], "rel": rel.replace(os.sep, "/")}


_editable_dirs: list[tuple[str, tuple[str, str]]] | None = None


def _editable() -> list[tuple[str, tuple[str, str]]]:
    """(checkout folder, (name, version)) of each editable install (PEP 610 direct_url.json), once per process."""
    global _editable_dirs
    if _editable_dirs is None:
        _editable_dirs = []
        for entry in sys.path:
            if not isinstance(entry, str) or not entry.endswith("-packages"):
                continue
            for folder in _listing(entry).values():
                try:
                    with open(os.path.join(entry, folder, "direct_url.json"), encoding="utf-8") as f:
                        text = f.read(4096)
                except OSError:
                    continue  # not a direct-URL install: the common case
                checkout = _editable_checkout(text)
                found = _read(os.path.join(entry, folder)) if checkout else None
                if found:
                    _editable_dirs.append((checkout, found))
        _editable_dirs.sort(key=lambda item: -len(item[0]))  # the innermost checkout wins
    return _editable_dirs


def _in_package(rel: str, dist: str) -> bool:
    """Whether a path below an editable checkout is in the package named like its distribution.

    Checked for the flat (``pkg/...``) and src (``src/pkg/...``) layouts.
    """
    parts = rel.split(os.sep)
    tops = parts[1:2] if parts[0] == "src" else parts[:1]
    return bool(tops) and _normal(tops[0][:-3] if tops[0].endswith(".py") else tops[0]) == _normal(dist)


def _editable_checkout(text: str) -> str:
    """The local folder of an editable install's direct_url.json, or ""."""
    import json  # direct-URL installs only (rare); never on the start-up path

    try:
        info = json.loads(text)
        url = info["url"] if info.get("dir_info", {}).get("editable") else ""
    except (ValueError, TypeError, KeyError, AttributeError):
        return ""
    if not isinstance(url, str) or not url.startswith(_FILE_URL):
        return ""
    path = url[len(_FILE_URL):]
    if "%" in path:
        from urllib.parse import unquote  # only for an escaped path: urllib costs a process ms to import

        path = unquote(path)
    return os.path.abspath(path) if path.startswith("/") else ""


def _root_of(path: str) -> str | None:
    """The longest sys.path folder that holds path."""
    best = None
    for entry in sys.path:
        if not entry or not isinstance(entry, str):
            continue
        folder = os.path.abspath(entry)
        if path.startswith(folder.rstrip(os.sep) + os.sep) and (best is None or len(folder) > len(best)):
            best = folder
    return best


def _normal(name: str) -> str:
    """A project name as metadata folders spell it (PEP 503-ish: case and -_. folded)."""
    return name.replace("-", "_").replace(".", "_").lower()


def dist_for(root: str, top: str) -> tuple[str, str] | None:
    """(name, version) of the distribution in root that provides the top-level package top."""
    key = (root, top)
    found = _by_top.get(key, _MISSING)
    if found is _MISSING:
        # Usually the project is named after its package (torch, torch_npu): one read.
        folder = _listing(root).get(_normal(top))
        found = _read(os.path.join(root, folder)) if folder else None
        if found is None:
            found = _scan(root).get(top)
        _by_top[key] = found
    return found  # type: ignore[no-any-return]


def _listing(root: str) -> dict[str, str]:
    listing = _listings.get(root)
    if listing is None:
        listing = {}
        try:
            names = os.listdir(root)
        except OSError:
            names = []
        for name in names:
            if name.endswith(_METADATA_SUFFIXES):
                listing.setdefault(_normal(name.rsplit(".", 1)[0].split("-", 1)[0]), name)
        _listings[root] = listing
    return listing


def _read(folder: str) -> tuple[str, str] | None:
    """Name and Version from a metadata folder's header block.

    Read directly rather than through importlib.metadata, whose import (email,
    csv, zipfile, pathlib) costs a process without torch ~100 ms; the two
    header fields are plain "Key: value" lines before the first blank line.
    """
    fields: dict[str, str] = {}
    for name in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                for line in f:
                    if not line.strip():
                        break
                    key, sep, value = line.partition(":")
                    if sep and key in ("Name", "Version"):
                        fields.setdefault(key, value.strip())
            break
        except OSError:
            continue
    return (fields["Name"], fields.get("Version", "")) if fields.get("Name") else None


def _scan(root: str) -> dict[str, tuple[str, str]]:
    """Every distribution in root by the top-level names it installs (once per root).

    Only reached when a package is not named like its project (yaml from PyYAML).
    """
    tops = _scanned.get(root)
    if tops is None:
        tops = {}
        for folder in _listing(root).values():
            try:
                from importlib.metadata import Distribution

                dist = Distribution.at(os.path.join(root, folder))
                found = (str(dist.metadata["Name"]), str(dist.version))
                names = (dist.read_text("top_level.txt") or "").split()
                if not names:
                    names = [str(f).split("/", 1)[0] for f in dist.files or ()]
            except Exception:
                continue
            for name in names:
                if name.endswith(".py"):
                    name = name[:-3]
                if name and not name.endswith(_METADATA_SUFFIXES) and name != "..":
                    tops.setdefault(name, found)
        _scanned[root] = tops
    return tops


def command_source() -> str | None:
    """The first line of this interpreter's -c code, shortened; None if it has none."""
    from ..common.cmdline import first_line, python_command
    from ..common.env import own_argv

    command = python_command(own_argv())
    if command is None or command[0] != "-c":
        return None
    return first_line(command[1], MAX_SRC) or None
