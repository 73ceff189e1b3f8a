"""Install routes, each into a fresh venv, each followed by an activation check.

Routes: ``pip install <repo>`` (wheel), the sdist from ``python -m build
--sdist``, ``pip install -e``, ``uv pip install``, and ``pip uninstall``.
The repository is copied to tmp first, so no build writes into it. Venvs
are made ``--without-pip`` and driven by this interpreter's pip through
``pip --python`` (seconds faster per venv, same installer code). Installs
use ``--no-deps``: activating ``-c pass`` does not need psutil.
Builds fetch hatchling from the index: without network the routes skip.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import venv
from pathlib import Path

import pytest

from .conftest import ROOT, Result, clean_env, events, read_log, run_python

pytestmark = pytest.mark.slow

INSTALL_TIMEOUT = 300
COPY_IGNORE = shutil.ignore_patterns(".git", ".venv*", "venv", "__pycache__", ".*_cache", ".hypothesis",
                                     "build", "dist", "*.egg-info", "*.jsonl")
OFFLINE = re.compile(r"(No matching distribution found|Could not find a version|Failed to fetch|"
                     r"Name or service not known|Temporary failure in name resolution|Network is unreachable)")
# Installed only if pyproject.toml force-includes wp_autotrace/_bootstrap.start.
SHIPS_START = '"wp_autotrace/_bootstrap.start"' in (ROOT / "pyproject.toml").read_text()


def tool_env() -> dict[str, str]:
    """clean_env() without anything that would point pip or python at another environment."""
    env = clean_env()
    for key in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PIP_REQUIRE_VIRTUALENV", "PIP_USER", "UV_PYTHON",
                "CONDA_PREFIX"):
        env.pop(key, None)
    return env


def run_tool(args: list[str], python: str = sys.executable, timeout: float = INSTALL_TIMEOUT) -> Result:
    """Run python (or an executable given as python) with args; skip when the index is unreachable."""
    res = run_python(args, tool_env(), timeout=timeout, python=python)
    if res.returncode != 0 and OFFLINE.search(res.stdout + res.stderr):
        pytest.skip(f"package index unreachable: {' '.join(args[:3])}: {OFFLINE.search(res.stdout + res.stderr)}")
    assert res.returncode == 0, f"{python} {' '.join(args)} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


class Venv:
    """A fresh venv without pip; this interpreter's pip installs into it."""

    def __init__(self, path: Path) -> None:
        venv.EnvBuilder(with_pip=False, clear=True, symlinks=True).create(path)
        self.path = path
        self.python = str(path / "bin" / "python")
        out = run_python(["-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tool_env(),
                         timeout=60, python=self.python)
        assert out.returncode == 0, out.stderr
        self.site = Path(out.stdout.strip())

    def pip(self, *args: str) -> Result:
        return run_tool(["-m", "pip", "--python", self.python, "--disable-pip-version-check", *args])

    def ours(self) -> list[str]:
        """What of ours lies at the top of site-packages."""
        if not self.site.is_dir():
            return []
        return sorted(p.name for p in self.site.iterdir() if "wp_autotrace" in p.name)


@pytest.fixture(scope="module")
def pip_ok() -> None:
    res = run_python(["-m", "pip", "--version"], tool_env(), timeout=60)
    match = re.search(r"pip (\d+)\.(\d+)", res.stdout)
    if res.returncode != 0 or not match or (int(match[1]), int(match[2])) < (22, 3):
        pytest.skip(f"needs pip>=22.3 (for --python) in {sys.executable}: {res.stdout.strip() or res.stderr[-200:]}")


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory, pip_ok: None) -> Path:
    """A copy of the repository without .git, venvs, caches or build output."""
    dest = tmp_path_factory.mktemp("src") / "wp-autotrace"
    shutil.copytree(ROOT, dest, ignore=COPY_IGNORE, symlinks=True)
    return dest


@pytest.fixture(scope="module")
def uv(tmp_path_factory: pytest.TempPathFactory, pip_ok: None) -> str:
    """uv, from PATH or installed from the index into a tool venv; skip if neither works."""
    found = shutil.which("uv")
    if found:
        return found
    tool = Venv(tmp_path_factory.mktemp("uvtool") / "venv")
    res = run_python(["-m", "pip", "--python", tool.python, "--disable-pip-version-check", "install", "-q", "uv"],
                     tool_env(), timeout=INSTALL_TIMEOUT)
    exe = tool.path / "bin" / "uv"
    if res.returncode != 0 or not exe.exists():
        pytest.skip(f"cannot install uv with pip: {(res.stderr or res.stdout).strip()[-300:]}")
    return str(exe)


@pytest.fixture(scope="module")
def build_python(tmp_path_factory: pytest.TempPathFactory, pip_ok: None) -> str:
    """An interpreter with pypa/build: this one, else a tool venv it is installed into."""
    if run_python(["-c", "import build"], tool_env(), timeout=60).returncode == 0:
        return sys.executable
    tool = Venv(tmp_path_factory.mktemp("buildtool") / "venv")
    tool.pip("install", "-q", "build")
    return tool.python


@pytest.fixture
def env_dir(tmp_path: Path) -> Venv:
    return Venv(tmp_path / "venv")


def check_activation(v: Venv, tmp_path: Path, package_dir: Path) -> None:
    """WP_AUTOTRACE=1 python -c pass in the venv writes exactly one process_start, from package_dir."""
    log = tmp_path / "activation.jsonl"
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    env = {**tool_env(), "WP_AUTOTRACE": "1", "WP_AUTOTRACE_LOG": str(log), "WP_AUTOTRACE_SAMPLE_INTERVAL": "0"}
    res = run_python(["-c", "pass"], env, timeout=60, cwd=cwd, python=v.python)
    assert res.returncode == 0 and res.stdout == "" and res.stderr == "", res.stderr
    recs = read_log(log)
    starts = events(recs, "process_start")
    assert len(starts) == 1, recs
    assert starts[0]["executable"].startswith(str(v.path)) and starts[0]["role"] == "main"
    assert len(events(recs, "process_exit")) == 1
    where = run_python(["-c", "import wp_autotrace.runtime.bootstrap as b; print(b.__file__)"], tool_env(), timeout=60,
                       cwd=cwd, python=v.python)
    assert Path(where.stdout.strip()).parent.parent == package_dir, where.stdout + where.stderr
    assert not list(cwd.iterdir())


def check_files(v: Venv, editable: bool = False) -> None:
    """The .pth (and the .start, where pyproject ships it) sit at the top of site-packages."""
    names = v.ours()
    assert "wp_autotrace.pth" in names, names
    assert ("wp_autotrace.start" in names) == SHIPS_START, names
    assert (v.site / "wp_autotrace.pth").read_text() == (ROOT / "wp_autotrace" / "_bootstrap.pth").read_text()
    if SHIPS_START:
        assert (v.site / "wp_autotrace.start").read_text() == (ROOT / "wp_autotrace" / "_bootstrap.start").read_text()
        assert (v.site / "wp_autotrace_start.py").read_text() == (ROOT / "wp_autotrace_start.py").read_text()
    if not editable:
        inside = sorted(p.name for p in (v.site / "wp_autotrace").iterdir())
        assert "_bootstrap.pth" not in inside and not (SHIPS_START and "_bootstrap.start" in inside), inside


def test_wheel_route(src: Path, env_dir: Venv, tmp_path: Path) -> None:
    """pip install (wheel) places wp_autotrace.pth at the top of site-packages; a child traces."""
    env_dir.pip("install", "--no-deps", str(src))
    check_files(env_dir)
    check_activation(env_dir, tmp_path, env_dir.site / "wp_autotrace")


def test_sdist_route(src: Path, build_python: str, env_dir: Venv, tmp_path: Path) -> None:
    """An sdist install places the .pth; a child traces."""
    dist = tmp_path / "dist"
    run_tool(["-m", "build", "--sdist", "--outdir", str(dist), str(src)], python=build_python)
    (sdist,) = dist.glob("wp_autotrace-*.tar.gz")
    env_dir.pip("install", "--no-deps", str(sdist))
    check_files(env_dir)
    check_activation(env_dir, tmp_path, env_dir.site / "wp_autotrace")


def test_editable_route(src: Path, env_dir: Venv, tmp_path: Path) -> None:
    """pip install -e places the .pth; a child traces."""
    env_dir.pip("install", "--no-deps", "-e", str(src))
    check_files(env_dir, editable=True)
    check_activation(env_dir, tmp_path, src / "wp_autotrace")


def test_uv_route(src: Path, uv: str, env_dir: Venv, tmp_path: Path) -> None:
    """uv pip install places the .pth; a child traces."""
    run_tool(["pip", "install", "--python", env_dir.python, "--no-deps", str(src)], python=uv)
    check_files(env_dir)
    check_activation(env_dir, tmp_path, env_dir.site / "wp_autotrace")


@pytest.mark.parametrize("editable", [False, True], ids=["wheel", "editable"])
def test_uninstall_leaves_nothing(editable: bool, src: Path, env_dir: Venv, tmp_path: Path) -> None:
    """pip uninstall removes the .pth and .start files, after a traced run too; tracing no longer starts."""
    env_dir.pip("install", "--no-deps", *(["-e"] if editable else []), str(src))
    check_files(env_dir, editable=editable)
    traced = {k: v for k, v in tool_env().items() if k != "PYTHONDONTWRITEBYTECODE"}
    traced.update(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(tmp_path / "before.jsonl"), WP_AUTOTRACE_SAMPLE_INTERVAL="0")
    res = run_python(["-c", "pass"], traced, timeout=60, cwd=tmp_path, python=env_dir.python)
    assert res.returncode == 0 and (tmp_path / "before.jsonl").exists(), res.stderr  # its start pack written too
    env_dir.pip("uninstall", "-y", "wp-autotrace")
    assert env_dir.ours() == []  # no .pth, .start, package (nor the start pack), dist-info or editable hook left
    log = tmp_path / "after.jsonl"
    env = {**tool_env(), "WP_AUTOTRACE": "1", "WP_AUTOTRACE_LOG": str(log), "WP_AUTOTRACE_SAMPLE_INTERVAL": "0"}
    res = run_python(["-c", "pass"], env, timeout=60, cwd=tmp_path, python=env_dir.python)
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")
    assert not log.exists()
    assert not os.path.exists(env_dir.site / "wp_autotrace.pth")


def test_pyproject_installs_start_beside_pth() -> None:
    """The build installs the PEP 829 .start file beside the .pth."""
    text = (ROOT / "pyproject.toml").read_text()
    assert '"wp_autotrace/_bootstrap.pth" = "wp_autotrace.pth"' in text
    # Same stem as the .pth, so 3.15-3.17 skip the .pth import line in favour of the entry point.
    assert '"wp_autotrace/_bootstrap.start" = "wp_autotrace.start"' in text, "pyproject does not ship the .start file"
    # its entry point's module, top-level: an untraced start imports it alone, not the package
    assert '"wp_autotrace_start.py" = "wp_autotrace_start.py"' in text
