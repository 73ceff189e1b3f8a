#!/usr/bin/env bash
# Runs the five user cases of docs/users.md one at a time, each under the independent probe, and scores them.
#   bash bench/users/run_all.sh /tmp/users-after [case ...]   # then read /tmp/users-after/<case>/{report.txt,score.txt}
set -u
OUT=${1:-/tmp/users}; shift || true
cd "$(dirname "$0")/../.."
PY=$PWD/.venv/bin/python
U=$PWD/bench/users
run() {  # run NAME [probe options] -- command
    local name=$1; shift
    if [ -n "$ONLY" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi
    timeout 500 "$PY" "$U/probe.py" --out "$OUT/$name" "$@" > "$OUT/$name.probe.txt" 2>&1
    "$PY" "$U/score.py" "$OUT/$name" > "$OUT/$name/score.txt" 2>&1
    echo "== $name"; grep -v '^ANSWER' "$OUT/$name/score.txt"
}
ONLY="$*"
mkdir -p "$OUT"
run sidecar_killed --linger 8 -- "$PY" "$U/sidecar_killed.py"
run dataloader --linger 6 -- "$PY" "$U/dataloader_compile.py"
run ci_serial --linger 6 -- "$PY" -m pytest -q -p no:cacheprovider "$U/ci_compile_tests.py"
run ci_xdist --linger 6 -- "$PY" -m pytest -q -p no:cacheprovider -n 2 "$U/ci_compile_tests.py"
run quiesced --via-run --linger 6 -- "$PY" "$U/quiesced_server.py"
