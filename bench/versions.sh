#!/usr/bin/env bash
# Runs the torch test files, and a user case under the probe, with another torch release than CI's 2.13.0
# (docs/torch-coverage.md, "Run live", says what ran on which). Never part of CI: it needs a venv of several GB.
#
#   python3.11 -m venv /work/venvs/t2141
#   /work/venvs/t2141/bin/pip install torch==2.14.1 psutil pytest hypothesis msgspec opentelemetry-proto numpy
#   /work/venvs/t2141/bin/pip install --no-deps -e .          # the tracer under test, from this checkout
#   bash bench/versions.sh /work/venvs/t2141 /tmp/v2141 tests test_pool_kinds test_counts ...
#   bash bench/versions.sh /work/venvs/t231 /tmp/v231 case legacy_fork_pool   # torch 2.1-2.3 only
#
# tests: each file with the venv's pytest (the scenarios start sys.executable: the venv's torch), one at a time,
# OUT/<file>.txt and a line each in OUT/meta.txt; --basetemp keeps each file's logs under OUT/tmp/<file>.
# case: bench/users/<case>.py under bench/users/probe.py (--fork-pool: torch 2.1-2.3's default pool), scored.
set -u
VENV=$1; OUT=$2; WHAT=$3; shift 3
cd "$(dirname "$0")/.."
mkdir -p "$OUT/tmp"  # pytest makes each --basetemp, not its parent
if [ "$WHAT" = tests ]; then
    for f in "$@"; do
        echo "== $f start $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> "$OUT/meta.txt"
        timeout 1500 "$VENV/bin/python" -m pytest -q -p no:cacheprovider -rfE --basetemp="$OUT/tmp/$f" \
            "tests/$f.py" > "$OUT/$f.txt" 2>&1
        echo "== $f rc=$? end $(date -u +%T) $(tail -n1 "$OUT/$f.txt")" >> "$OUT/meta.txt"
    done
elif [ "$WHAT" = case ]; then
    for c in "$@"; do
        timeout 500 .venv/bin/python bench/users/probe.py --out "$OUT/$c" --fork-pool --timeout 400 --linger 6 -- \
            "$VENV/bin/python" "$PWD/bench/users/$c.py" > "$OUT/$c.probe.txt" 2>&1
        .venv/bin/python bench/users/score.py "$OUT/$c" > "$OUT/$c/score.txt" 2>&1
        echo "== $c"; cat "$OUT/$c/score.txt"
    done
fi
# The targets each run's logs saw fire: bench/versions.sh's logs, listed by
#   grep -rhoa '"target":"[^"]*"' OUT | sort | uniq -c
