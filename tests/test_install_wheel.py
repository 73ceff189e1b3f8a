"""README's install block, the route test_install.py does not take: a wheel from python -m build, then doctor."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import ROOT, run_python

# test_install's fixtures, shared (pytest finds fixtures by name in the module).
from .test_install import (  # noqa: F401
    Venv,
    build_python,
    check_activation,
    check_files,
    env_dir,
    pip_ok,
    run_tool,
    src,
    tool_env,
)

pytestmark = pytest.mark.slow


def test_readme_install_block_names_only_tested_routes() -> None:
    """Every install command README's Install section gives is one the install tests take."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## Install\n", 1)[1].split("```", 2)[1]
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    tested = {"pip install .", "uv pip install .", "python -m build --wheel", "pip install dist/wp_autotrace-*.whl",
              "wp-autotrace doctor"}
    assert {c for c in commands if not c.startswith(("git clone", "python -m pip install /"))} <= tested, commands


def test_built_wheel_route_and_doctor(src: Path, build_python: str, env_dir: Venv,  # noqa: F811
                                      tmp_path: Path) -> None:
    """python -m build --wheel, pip install the wheel: the .pth is placed, a child traces, doctor says all good."""
    dist = tmp_path / "dist"
    run_tool(["-m", "build", "--wheel", "--outdir", str(dist), str(src)], python=build_python)
    (wheel,) = dist.glob("wp_autotrace-*.whl")
    env_dir.pip("install", "--no-deps", str(wheel))
    check_files(env_dir)
    check_activation(env_dir, tmp_path, env_dir.site / "wp_autotrace")
    res = run_python([], tool_env(), timeout=120, cwd=tmp_path, python=str(env_dir.path / "bin" / "wp-autotrace"))
    assert res.returncode == 64 and "choose a command" in res.stderr  # the console script is there
    res = run_python(["-m", "wp_autotrace", "doctor", "--python", env_dir.python], tool_env(), timeout=120,
                     cwd=tmp_path, python=env_dir.python)
    assert res.returncode == 0 and res.stdout.rstrip().endswith("all good"), res.stdout + res.stderr
