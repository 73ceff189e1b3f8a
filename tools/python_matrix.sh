#!/usr/bin/env bash
# Run the torch-free tests on every pyenv Python we support.
#
#   tools/python_matrix.sh DIR [VERSION...]      (default versions: 3.9 3.10 3.11 3.12 3.13)
#
# The repository is built into a wheel once (DIR/wheel; pure Python, py3-none-any: the same file every
# Python installs, so building it per Python only repeated hatchling's isolated build env). For each
# version found under $PYENV_ROOT/versions (default ~/.pyenv): a fresh venv DIR/py<version>, that wheel
# installed into it (not editable) with pytest and hypothesis (no torch), then the torch-free tests.
# JOBS Pythons (default 2) run at once: the per-Python install and the tests' own waits leave a core idle
# much of the time, and the tests bound themselves by conditions, not by the box being quiet.
# Each Python's output goes to DIR/py<version>.log; one summary line per Python
# is printed in the order given, then a total. Exit status: 0 if every Python found passed, 1 otherwise (a
# version not installed under pyenv is reported as SKIP and does not fail).
# TESTS overrides the test files; PIP_ARGS adds pip install options; JOBS sets how many Pythons run at once.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: tools/python_matrix.sh DIR [VERSION...]}
shift
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(3.9 3.10 3.11 3.12 3.13)
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
# The runtime's files (the host path differs by version), then the analysis read on crafted logs: a report's
# reader may be any supported Python (3.9 lacks sys.stdlib_module_names; a 3.9-only crash there was found only
# by hand), so these are the torch-free files that together run all but ~50 of the ~7,700 analysis/ and
# common/ lines that every torch-free file runs (coverage on 3.11, on top of the runtime's files), leaving out
# the slow ones that add few: test_logread (80 s for 27 more lines), test_export_stream (55 s, 2),
# test_cleanup (26 s, 11). The list adds ~100 s per Python on a loaded 2-core box (~20 s of CPU).
runtime_tests="tests/test_hooks.py tests/test_activation.py tests/test_invisible.py tests/test_report.py
    tests/test_startfile.py tests/test_sink.py tests/test_log_fd.py tests/test_log_fd_taken.py tests/test_sampler.py
    tests/test_watcher.py tests/test_cli.py tests/test_layers.py tests/test_logsafe.py tests/test_orphan_fds.py
    tests/test_cgroup_reads.py tests/test_one_pass.py tests/test_refused_start.py tests/test_watcher_signals.py
    tests/test_preload.py tests/test_join_start.py"
analysis_tests="tests/test_model.py tests/test_pools.py tests/test_sidecar_python.py tests/test_no_verdict.py tests/test_span_shape.py
    tests/test_report_text.py tests/test_answer_text.py tests/test_held_jobs.py tests/test_jobs.py
    tests/test_labels.py tests/test_count_events.py tests/test_end_unseen.py tests/test_verdict.py
    tests/test_evidence_rule.py tests/test_oom.py tests/test_report_doc.py tests/test_html.py tests/test_orphaned_compiler.py
    tests/test_unseen_sidecar.py"
tests=${TESTS:-$runtime_tests $analysis_tests}
jobs=${JOBS:-2}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# Newest installed patch release of a minor version, e.g. 3.10 -> .../versions/3.10.13/bin/python3.10
find_python() {
    local minor=$1 found
    found=$(find "$pyenv_root/versions" -maxdepth 1 -name "$minor.*" 2>/dev/null | grep -E "/$minor\.[0-9]+$" | sort -V | tail -1)
    [ -n "$found" ] && [ -x "$found/bin/python$minor" ] && echo "$found/bin/python$minor"
}

# A start that reads the pack made START's code modules as the one joined module (wp_autotrace/__init__.py, JOINED)
joined_check='import sys, wp_autotrace._preload as p; p.load(); m = sys.modules
assert m["wp_autotrace.runtime.sink"] is m["wp_autotrace.runtime.bootstrap"], "no joined start module"'

# One Python: venv, install, test; all output to its log. Prints nothing.
run_one() {
    local py=$1 venv=$2
    rm -rf "$venv"
    "$py" -m venv "$venv" || return 10
    # shellcheck disable=SC2086  # PIP_ARGS is a list of options
    timeout 900 "$venv/bin/python" -m pip install -q --disable-pip-version-check ${PIP_ARGS:-} "$wheel" pytest \
        hypothesis || return 11
    # The installed copy (not the checkout) must be what a fresh interpreter activates.
    (cd "$dir" && "$venv/bin/python" -c \
        'import sys, wp_autotrace.runtime.bootstrap as b; assert b.__file__.startswith(sys.prefix), b.__file__') || return 12
    # The start modules' pack, as an install's first traced start writes it (these shells export
    # PYTHONDONTWRITEBYTECODE=1, under which no start writes one; a start reads one all the same): every traced
    # start of the tests then runs the joined start module, as an installed tracer's do. The no-pack path is the
    # tests' own (test_preload's copies, -B). A second start checks that it made the joined module.
    (cd "$dir" && env -u PYTHONDONTWRITEBYTECODE "$venv/bin/python" -c 'import wp_autotrace._preload as p; p.load()' \
        && "$venv/bin/python" -c "$joined_check") || return 15
    # shellcheck disable=SC2086  # $tests is a list of paths
    (cd "$repo" && timeout 900 "$venv/bin/python" -m pytest -q -rfE -p no:cacheprovider -m "not torch" $tests)
    local rc=$?
    [ $rc -eq 0 ] || return $((rc == 124 ? 124 : 13))
}

declare -A what=([10]="venv failed" [11]="pip install failed" [12]="installed copy not used" [13]="tests failed"
                 [15]="start pack not joined"
                 [14]="no exit status written" [124]="timed out")
# The wheel, once, by the first Python found (any will do: the wheel is the same for all).
wheel=
for v in "${versions[@]}"; do
    py=$(find_python "$v") || continue
    rm -rf "$dir/wheel"
    # shellcheck disable=SC2086  # PIP_ARGS is a list of options
    if timeout 900 "$py" -m pip wheel -q --disable-pip-version-check --no-deps ${PIP_ARGS:-} -w "$dir/wheel" "$repo" \
            >"$dir/wheel.log" 2>&1; then
        wheel=$(ls "$dir"/wheel/wp_autotrace-*-py3-none-any.whl 2>/dev/null | head -1)
    fi
    [ -n "$wheel" ] || { echo "wheel build failed (log $dir/wheel.log)"; cat "$dir/wheel.log"; exit 1; }
    break
done

# Start every Python found, JOBS at a time, in the background; each writes its exit status and seconds to
# DIR/py<version>.rc once done.
declare -A pys=()
for v in "${versions[@]}"; do
    py=$(find_python "$v") || continue
    pys[$v]=$py
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
        wait -n
    done
    (
        start=$SECONDS
        run_one "$py" "$dir/py$v" >"$dir/py$v.log" 2>&1
        echo "$? $((SECONDS - start))" >"$dir/py$v.rc"
    ) &
done
wait

failed=0
passed=0
ran=0
for v in "${versions[@]}"; do
    py=${pys[$v]:-}
    if [ -z "$py" ]; then
        echo "python $v: SKIP (not under $pyenv_root/versions)"
        continue
    fi
    log="$dir/py$v.log"
    read -r rc took <"$dir/py$v.rc" || { rc=14; took=0; }
    full=$("$py" -c 'import platform; print(platform.python_version())' 2>/dev/null || echo "$v")
    result=$(grep -E '^[0-9]+ (passed|failed)|^(=+ )?[0-9]+ (passed|failed)|(passed|failed|error).* in [0-9.]+s' "$log" \
        | tail -1 | sed -E 's/^=+ //; s/ =+$//')
    ran=$((ran + 1))
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1))
        echo "python $full: PASS  ${result:-?}  (${took}s, log $log)"
    else
        failed=1
        echo "python $full: FAIL  ${what[$rc]:-exit $rc}${result:+: $result}  (${took}s, log $log)"
        # The log dies with CI's checkout: the failing tests' names and their last lines go to the output.
        grep -E '^(FAILED|ERROR) ' "$log" | head -20 | sed 's/^/    /'
        grep -B2 -A30 -E '^_{5,} .* _{5,}$' "$log" | head -120 | sed 's/^/    | /'
    fi
done
echo "== $passed of $ran Pythons passed"
exit $failed
