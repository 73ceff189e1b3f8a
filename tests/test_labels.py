"""labels: process labels from argv, and the compiler toolchain, as pure functions."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from wp_autotrace.analysis.derive.labels import TOOLCHAIN, label_for, tool_name
from wp_autotrace.common.cmdline import first_line, is_python, python_command, python_flags
from wp_autotrace.common.env import runs_own_cli

PY = "/venv/bin/python3.11"


@pytest.mark.parametrize(("argv", "label"), [
    ([PY, "train.py", "--epochs", "3"], "train.py"),
    ([PY, "-u", "/home/u/proj/train.py"], "train.py"),
    ([PY, "-X", "importtime", "-W", "ignore", "t.py"], "t.py"),
    ([PY, "-Wignore", "-Xdev", "t.py"], "t.py"),
    ([PY, "-m", "pytest", "-q"], "-m pytest"),
    ([PY, "-um", "pkg.tool"], "-m pkg.tool"),
    ([PY, "-mpkg"], "-m pkg"),
    ([PY, "-m", "torch.distributed.run", "--nproc_per_node=2", "t.py"], "torchrun"),
    (["/venv/bin/python", "/venv/bin/torchrun", "--standalone", "t.py"], "torchrun"),
    ([PY, "-c", "import os; print(os.getpid())"], "-c import os; print(os.getpid())"),
    ([PY, "-c", "\n\n  x = 1\ny = 2"], "-c x = 1"),
    ([PY, "-c", "a" * 100], "-c " + "a" * 37 + "..."),
    ([PY, "-Ic", "pass"], "-c pass"),
    ([PY, "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7)",
      "--multiprocessing-fork"], "multiprocessing spawn child"),
    ([PY, "-c", "from multiprocessing.forkserver import main; main(4, 5, ['__main__'], **{})"],
     "multiprocessing forkserver"),
    ([PY, "-c", "from multiprocessing.resource_tracker import main;main(6)"], "multiprocessing resource_tracker"),
    # execnet's popen bootstrap line: how pytest-xdist starts each worker (docs/users.md, D5)
    ([PY, "-c", "import sys;exec(eval(sys.stdin.readline()))"], "pytest-xdist worker (execnet)"),
    ([PY, "-c", '\nimport sys\nif sys.platform != "linux":\n    import torch\nfrom ctypes import cdll\n'
               'cdll.LoadLibrary("/tmp/x/avx512.so")\n'], "torch ISA probe (python -c ...LoadLibrary...)"),
    ([PY, "/site/torch/_inductor/compile_worker/__main__.py", "--workers=2"], "compile sidecar"),
    ([PY, "/site/torch/_inductor/__autotune_main__.py", "--parent=1"], "autotune worker"),
    ([PY, "-m", "torch._vendor.quack._compile_worker"], "quack compile worker"),
    ([PY, "/src/mypkg/__main__.py"], "mypkg/__main__.py"),
    ([PY, "-"], "python (stdin)"),
    ([PY], "python"),
    ([PY, "-i"], "python"),
    (["/usr/bin/g++", "-O3", "x.cpp"], "g++"),
    (["bash"], "bash"),
    ([], "?"),
])
def test_label_for(argv: list[str], label: str) -> None:
    assert label_for(argv) == label


def test_python_command_kinds() -> None:
    assert python_command(["/usr/bin/gcc", "-c", "x.c"]) is None  # -c of another program is not code
    assert python_command([PY, "-c", "pass", "extra"]) == ("-c", "pass")
    assert python_command([PY, "-c"]) == ("-c", "")
    assert python_command([PY, "--check-hash-based-pycs", "always", "s.py"]) == ("script", "s.py")


@pytest.mark.parametrize(("name", "yes"), [
    ("python", True), ("python3", True), ("python3.11", True), ("/usr/bin/python3.9d", True), ("pypy3", True),
    ("python3-config", False), ("pythonista", False), ("ipython", False), ("g++", False),
])
def test_is_python(name: str, yes: bool) -> None:
    assert is_python(name) is yes


@pytest.mark.parametrize(("name", "cmd", "tool"), [
    ("cc1plus", ["/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus", "-quiet"], "cc1plus"),
    ("g++", "g++ -O3 -shared x.cpp", "g++"),
    # gcc runs collect2 with a driver-like argv[0]: the comm name decides.
    ("collect2", ["g++", "-plugin", "liblto_plugin.so"], "collect2"),
    ("ld", ["/usr/bin/ld", "-o", "x.so"], "ld"),
    ("ld.gold", [], "ld.gold"),
    ("as", ["as", "--64"], "as"),
    ("gcc-12", [], "gcc"),
    ("clang-17", [], "clang"),
    ("x86_64-linux-gnu-gcc-12", [], "gcc"),
    # comm cut at 15 characters: the command line tells
    ("x86_64-linux-gn", ["/usr/bin/x86_64-linux-gnu-g++-12", "-c"], "g++"),
    ("nvcc", [], "nvcc"),
    ("ptxas", [], "ptxas"),
    ("", ["/usr/bin/cc", "-c", "x.c"], "cc"),
    ("python3.11", ["python3.11", "-c", "import gcc"], None),
    ("bash", ["gcc"], None),  # a whole comm name that is not a tool wins over argv
    ("my-tool-name", [], None),
    ("sccache", [], "sccache"),
])
def test_toolchain(name: str, cmd: list[str], tool: str | None) -> None:
    assert tool_name(name, cmd) == tool


def test_toolchain_names_cover_the_issue() -> None:
    assert {"cc", "gcc", "g++", "c++", "clang", "cc1", "cc1plus", "as", "ld", "ld.bfd", "ld.gold", "collect2",
            "nvcc", "ptxas"} <= TOOLCHAIN


def test_first_line() -> None:
    assert first_line("\n  \n  import os  \nx") == "import os"
    assert first_line("") == ""
    assert first_line("abcdefgh", 5) == "ab..."


@pytest.mark.parametrize(("argv", "flags"), [
    (["python", "-S", "x.py"], "S"),
    (["python", "-IS", "x.py"], "IS"),
    (["python", "-X", "importtime", "-S", "-c", "pass"], "S"),
    (["python", "-Ximporttime", "-Wd", "-B", "x.py", "-S"], "B"),  # -S after the script is the script's
    (["python", "-c", "print()", "-S"], ""),
    (["python", "-Sc", "print()"], "S"),
    (["python", "--check-hash-based-pycs", "always", "-u", "-m", "mod"], "u"),
])
def test_python_flags_are_the_interpreters_options_only(argv: list[str], flags: str) -> None:
    """What `wp-autotrace run` reads to refuse a -S run: options before the script, -c or -m, clusters split."""
    assert python_flags(argv) == flags


@pytest.mark.parametrize(("argv", "own"), [
    (["/venv/bin/python3", "/venv/bin/wp-autotrace", "report", "x"], True),
    (["python", "-m", "wp_autotrace", "run", "--", "python", "t"], True),
    (["python", "-Im", "wp_autotrace"], True),
    (["python", "-X", "importtime", "-mwp_autotrace"], True),
    (["custom-interpreter", "-m", "wp_autotrace"], True),  # whatever the interpreter is called
    (["python", "-c", "import wp_autotrace"], False),
    (["python", "train.py", "-m", "wp_autotrace"], False),
    (["python", "--check-hash-based-pycs", "always", "wp-autotrace"], True),
    (["python", "-m", "wp_autotrace_plugin"], False),
    (["python"], False),
    ([], False),
])
def test_runs_own_cli(argv: list[str], own: bool) -> None:
    """The interpreters that run the wp-autotrace command itself (never traced), and only those."""
    assert runs_own_cli(argv) is own


def test_an_untraced_python_c_is_known_by_its_whole_code() -> None:
    """The watcher's command line joins the arguments with spaces: `-c`'s code was cut at its first space, and
    an untraced ISA probe read '-c import' (not folded in the Process tree with the others)."""
    from wp_autotrace.analysis.derive.labels import cmd_argv

    argv = cmd_argv("/usr/bin/python3 -c import ctypes; ctypes.cdll.LoadLibrary('/tmp/x.so')")
    assert argv == ["/usr/bin/python3", "-c", "import ctypes; ctypes.cdll.LoadLibrary('/tmp/x.so')"]
    assert label_for(argv) == "torch ISA probe (python -c ...LoadLibrary...)"
    assert cmd_argv("python3 train.py -c a b") == ["python3", "train.py", "-c", "a", "b"]  # the script's own -c


def test_runs_own_cli_reads_the_grammar_only_where_an_argument_names_the_command() -> None:
    """Every traced start asks runs_own_cli: where no argument holds either name of the command the answer is
    no without loading the argv grammar (cmdline.py); where one does, the grammar decides, as before."""
    code = ("import sys\nfrom wp_autotrace.common.env import runs_own_cli\n"
            "g = 'wp_autotrace.common.cmdline'\n"
            "print(runs_own_cli([sys.executable, '-m', 'pytest', 'wp_autotrac', 'wp-autotrac']), g in sys.modules)\n"
            "print(runs_own_cli([sys.executable, 'x', 'wp_autotrace']), g in sys.modules)\n"
            "print(runs_own_cli([sys.executable, '-Imwp_autotrace']), g in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={k: v for k, v in os.environ.items() if not k.startswith("WP_AUTOTRACE")})
    assert out.stdout.split("\n")[:3] == ["False False", "False True", "True True"], out.stderr
