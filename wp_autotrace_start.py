"""Entry point for the ``wp_autotrace.start`` file (PEP 829, Python 3.15+): ``wp_autotrace_start:start``.

site imports this module and calls :func:`start` in every interpreter, so it
must stay tiny: a top-level module, not one of the package (whose __init__ is the start
modules' loader, ~0.3M instructions to import), it imports nothing but ``os`` and ``sys``
(loaded before site runs) and imports the package only when
WP_AUTOTRACE or WP_AUTOTRACE_GUARD asks for it, as the one-line
``wp_autotrace.pth`` that older Pythons run does (that line tests only whether
either variable is set, then ``_preload.start()`` makes the test of :func:`wanted`
and :func:`in_main_interpreter`: a copy, since importing this module there would
cost every traced start a file; tests/test_startfile.py holds the two equal).
Where both run (3.15-3.17 skip the .pth import line only when the names match),
``bootstrap.start()``'s run-once guard keeps activation to one per process.
"""

import os
import sys

_FALSE = ("", "0", "false", "no", "off")


def in_main_interpreter() -> bool:
    """Whether this is the process's main interpreter (site runs again in every subinterpreter).

    _preload.start() and runtime/bootstrap.py keep a copy (this module imports only os and sys).
    3.12+: _thread._is_main_interpreter (a builtin module every interpreter has loaded).
    3.9-3.11: only the main interpreter has imported _signal before site runs (CPython installs
    its SIGINT handler there first); an embedding application that installs no signal handlers
    then runs untraced, never traced twice.
    """
    is_main = sys.modules.get("_thread", sys).__dict__.get("_is_main_interpreter")
    return bool(is_main()) if is_main is not None else "_signal" in sys.modules


def wanted() -> bool:
    """WP_AUTOTRACE or WP_AUTOTRACE_GUARD not a false word (a bad value warns): _preload.start()'s test."""
    env = os.environ
    return (env.get("WP_AUTOTRACE", "").strip().lower() not in _FALSE
            or env.get("WP_AUTOTRACE_GUARD", "").strip().lower() not in _FALSE)


def start() -> None:
    """Activate tracing if the environment asks for it; otherwise do nothing. Never raises."""
    try:
        if not wanted() or not in_main_interpreter():
            return
        from wp_autotrace import start as _start  # the same test, the start modules from their pack, bootstrap.start()

        _start()
    except Exception as exc:  # bootstrap.start() never raises; this is its import failing
        root = os.environ.get("WP_AUTOTRACE_ROOT_PID")  # common/env.py ROOT_ENV (not imported here)
        if root and root != str(os.getpid()):
            return  # a descendant never writes on its stderr (a host may capture it)
        text = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(exc))  # as sink_rare.one_line
        try:
            os.write(2, f"wp-autotrace: tracing disabled: {type(exc).__name__}: {text}\n".encode("utf-8", "replace"))
        except OSError:
            pass
