"""Create the benchmark's virtual environments under bench/.venvs, from scratch.

Three environments, all made with the same base interpreter:

- ``bare``:  psutil only (wp-autotrace *not* installed),
- ``pkg``:   the repository, installed from a freshly built wheel (never editable),
- ``torch``: the repository, ``torch==2.13.0`` and the peer tools (hunter, viztracer).

An environment is rebuilt when its recorded spec changes; the repository wheel
is rebuilt and reinstalled on every run, so the figures always describe the
working tree.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
VENVS = BENCH / ".venvs"
# Pinned: an unpinned torch pulls a multi-GB CUDA build.
TORCH_REQ = "torch==2.13.0"
PEER_REQS = ("hunter", "viztracer")
# The package's own dependencies (pyproject.toml), installed before the wheel (--no-deps).
DEPS = ("psutil", "msgspec")
PIP_TIMEOUT_S = 1800


def python_of(venv: Path) -> Path:
    """The interpreter of a venv."""
    return venv / "bin" / "python"


def _pip(venv: Path, *args: str) -> None:
    cmd = [str(python_of(venv)), "-m", "pip", "--disable-pip-version-check", "-q", *args]
    print("  $", " ".join(cmd[2:]), flush=True)
    out = subprocess.run(cmd, timeout=PIP_TIMEOUT_S, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"pip failed ({out.returncode}):\n{out.stdout[-2000:]}{out.stderr[-3000:]}")


def _ensure(name: str, base_python: str, reqs: list[str]) -> Path:
    """Create venv `name` with `reqs` unless an identical one exists."""
    venv = VENVS / name
    spec = {"python": base_python, "reqs": reqs}
    marker = venv / "bench-spec.json"
    if marker.exists() and json.loads(marker.read_text()) == spec and python_of(venv).exists():
        return venv
    print(f"creating {venv} ({', '.join(reqs) or 'nothing extra'})", flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True, timeout=300)
    if reqs:
        _pip(venv, "install", *reqs)
    marker.write_text(json.dumps(spec))
    return venv


def _installed_version(venv: Path, dist: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({dist!r}))"
    out = subprocess.run([str(python_of(venv)), "-c", code], capture_output=True, text=True, timeout=60)
    return out.stdout.strip()


def build_wheel(venv: Path) -> Path:
    """Build the repository's wheel (with venv's pip) into a temporary folder."""
    out = Path(tempfile.mkdtemp(prefix="wp-bench-wheel-"))
    _pip(venv, "wheel", "--no-deps", "-w", str(out), str(REPO))
    (wheel,) = out.glob("wp_autotrace-*.whl")
    return wheel


def base_interpreter(python: str) -> str:
    """The real interpreter behind `python` (a venv's python resolves to its base)."""
    code = "import os, sys; print(os.path.realpath(getattr(sys, '_base_executable', '') or sys.executable))"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def prepare(names: set[str], python: str = sys.executable) -> dict[str, Path]:
    """Make the venvs in `names` (a subset of bare/pkg/torch) and install the current repo wheel."""
    VENVS.mkdir(parents=True, exist_ok=True)
    base_python = base_interpreter(python)
    made: dict[str, Path] = {}
    # pkg always exists: it builds the wheel and fixes the dependency versions bare gets.
    pkg = _ensure("pkg", base_python, list(DEPS))
    wheel = build_wheel(pkg)
    try:
        _pip(pkg, "install", "--force-reinstall", "--no-deps", str(wheel))
        made["pkg"] = pkg
        if "bare" in names:
            pins = [f"{d}=={_installed_version(pkg, d)}" for d in ("psutil",)]  # wp-autotrace not installed
            made["bare"] = _ensure("bare", base_python, pins)
        if "torch" in names:
            venv = _ensure("torch", base_python, [TORCH_REQ, *DEPS, *PEER_REQS])
            _pip(venv, "install", "--force-reinstall", "--no-deps", str(wheel))
            made["torch"] = venv
    finally:
        shutil.rmtree(wheel.parent, ignore_errors=True)
    return made
