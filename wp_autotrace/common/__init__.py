"""Stdlib-only leaves that any process may import: the shared base of every side.

The layers, in words (tests/test_layers.py is their one authoritative statement, and enforces them):

- ``common/``: the log's vocabulary and facts (targets, /proc, command lines,
  redaction). Imports nothing from the other layers.
- ``runtime/``: runs inside every traced host process. Imports ``common/``
  only; it needs the differential suite (tests/test_invisible.py) and the
  start-up bench (bench/import_cost.py). No ``typing``, ``json`` or ``re`` at
  a module's top level: each costs every traced process start-up time.
- ``watcher/``: the watcher's own process. Imports ``common/``,
  ``runtime.sink`` and ``runtime.spawn`` (its argv contract); never ``analysis/``.
- ``analysis/``: offline: log -> model -> findings -> report -> text/exports.
  Imports ``common/`` only, never ``runtime/``.
- ``cli/``: the ``wp-autotrace`` command. May import anything.
"""
