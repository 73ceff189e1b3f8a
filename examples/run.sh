#!/usr/bin/env bash
# Trace the bundled seed scenario on a fresh machine and print the report.
# Creates .venv (package + torch 2.13.0 CPU) on first use. Args go to run_example.py.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    python3.11 -m venv .venv 2>/dev/null || python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e . "torch==2.13.0"
.venv/bin/python examples/run_example.py "$@"
