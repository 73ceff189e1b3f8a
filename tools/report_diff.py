"""Every output of the offline reader, of this tree against a git ref, on the same logs: byte for byte.

Usage: python tools/report_diff.py --ref REF [--new TREE] LOG_OR_DIR... [--keep DIR]

For each log (a directory: every *.jsonl under it), each tree writes `report`, `report --verbose`, `report
--json` on the fast path (msgspec) and on the json path, `report --html -o -`, `export -o -` (Chrome) and
`export --format otlp -o -`, in one process per tree (cli.main.main(argv), stdout captured; COLUMNS fixed),
the ref from a `git archive` of it. Prints how many outputs differ and the first differing ones; exits 1 if
any does. A change meant to keep every output (a faster reader or fold) runs this before it lands; the logs are
what the change could reach (the tests' crafted logs: run the analysis tests with --basetemp DIR and give DIR;
bench/report_scale.py's synthetic run).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VARIANTS = {
    "text": ["report", "{log}"],
    "verbose": ["report", "--verbose", "{log}"],
    "json": ["report", "--json", "{log}"],
    "json-nofast": ["report", "--json", "{log}"],
    "html": ["report", "--html", "-o", "-", "{log}"],
    "chrome": ["export", "-o", "-", "{log}"],
    "otlp": ["export", "--format", "otlp", "-o", "-", "{log}"],
}
# Run in each tree's own interpreter: every variant of every log, each output's bytes (and exit status) to OUT.
DRIVER = """
import io, json, sys
from pathlib import Path
from wp_autotrace.analysis.read import logread
from wp_autotrace.cli.main import main
logs, variants, out = json.loads(sys.argv[1]), json.loads(sys.argv[2]), Path(sys.argv[3])
real = sys.stdout
class Kept(io.BytesIO):
    def close(self):  # a command that closes its stdout: its bytes are still read here
        pass
for i, log in enumerate(logs):
    for name, argv in variants.items():
        logread.use_fast(name != "json-nofast")
        buf = Kept()
        sys.stdout = io.TextIOWrapper(buf, encoding="utf-8", write_through=True)
        try:
            code = main([a.replace("{log}", log) for a in argv])
        except SystemExit as exc:
            code = exc.code
        except Exception as exc:
            code = f"raised {type(exc).__name__}: {exc}"
        try:
            sys.stdout.flush()
        except ValueError:  # closed by the command
            pass
        sys.stdout = real
        (out / f"{i}.{name}").write_bytes(buf.getvalue() + f"\\n[exit {code}]".encode())
"""


def logs_of(paths: list[str]) -> list[str]:
    """The logs named, a directory's every *.jsonl (non-empty), sorted; absolute: each tree's driver runs in a
    folder of its own, where a relative path names no file and both trees' outputs are the same refusal."""
    out: list[str] = []
    for path in (Path(p).resolve() for p in paths):
        found = sorted(path.rglob("*.jsonl")) if path.is_dir() else [path]
        out += [str(p) for p in found if p.is_file() and p.stat().st_size]
    return out


def outputs(tree: Path, logs: list[str], out: Path) -> None:
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WP_AUTOTRACE")}
    env.update(PYTHONPATH=str(tree), COLUMNS="120")
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(logs), json.dumps(VARIANTS), str(out)], env=env,
                          cwd=out, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        raise SystemExit(f"{tree}: the driver failed ({done.returncode}):\n{done.stderr[-3000:]}")


def _digest(path: Path) -> bytes:
    return hashlib.sha256(path.read_bytes()).digest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+")
    parser.add_argument("--ref", required=True, help="the git ref to compare with (e.g. main)")
    parser.add_argument("--new", default=str(REPO), help="the tree to compare (default: this one, as it is now)")
    parser.add_argument("--keep", default=None, help="leave both trees' outputs here")
    args = parser.parse_args()
    logs = logs_of(args.logs)
    tmp = Path(tempfile.mkdtemp(prefix="wp-report-diff-"))
    try:
        old = tmp / "old"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.ref, "wp_autotrace"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        outputs(old, logs, tmp / "old-out")
        outputs(Path(args.new), logs, tmp / "new-out")
        differ = [f.name for f in sorted((tmp / "old-out").iterdir())
                  if _digest(f) != _digest(tmp / "new-out" / f.name)]
        total = len(list((tmp / "old-out").iterdir()))
        print(f"{len(logs)} logs, {total} outputs, {len(differ)} differ")
        for name in differ[:20]:
            print(f"  {logs[int(name.split('.')[0])]}: {name.split('.', 1)[1]}")
        if args.keep:
            shutil.copytree(tmp, args.keep, dirs_exist_ok=True)
        return 1 if differ else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
