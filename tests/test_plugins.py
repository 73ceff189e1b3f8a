"""The plugin table (wp_autotrace/analysis/derive/plugins.py) against docs/plugin-coverage.md and the targets.

Also runs tools/check_plugins.py's reader on the stand-in plugins in
tests/fixtures/plugins, zipped as wheels, so the tool's verdicts can fail.
"""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from wp_autotrace.analysis.derive.plugins import PLUGINS, advice_for, advice_for_frame, known_behaviour, version_key
from wp_autotrace.common.targets import TARGETS

from .conftest import ROOT

DOC = ROOT / "docs" / "plugin-coverage.md"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "plugins"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_plugins", ROOT / "tools" / "check_plugins.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TOOL = _tool()
SUMMARY = TOOL.parse_summary(DOC.read_text())


def test_doc_covers_enough_releases() -> None:
    """At least 10 torch_npu releases and IPEX are in the document."""
    dists = [d for d, _, _ in SUMMARY]
    assert dists.count("torch_npu") >= 10
    assert "intel_extension_for_pytorch" in dists


@pytest.mark.parametrize("dist,version,shape", SUMMARY)
def test_table_matches_doc(dist: str, version: str, shape: str) -> None:
    """Every release the document read has a table row with the document's shape."""
    row = known_behaviour(dist, version)
    assert row is not None, f"no plugins.py row covers {dist} {version}"
    assert row.shape == shape


def test_table_rows_start_and_end_at_read_releases() -> None:
    """A row's bounds are releases the document read: the table claims nothing unread."""
    read = {(d, v) for d, v, _ in SUMMARY}
    for row in PLUGINS:
        assert (row.dist, row.first) in read and (row.dist, row.last) in read, row
        assert version_key(row.first) <= version_key(row.last), row


def test_entry_points_are_default_targets() -> None:
    """Every pool entry point the table lists is a row of the default targets."""
    targeted = {f"{t.module}:{t.qualname}" for t in TARGETS}
    listed = {e for row in PLUGINS for e in row.entry_points}
    assert listed and listed <= targeted, listed - targeted
    assert "torch._inductor.async_compile:AsyncCompile.process_pool" in listed


@pytest.mark.parametrize("lo,hi", [
    ("2.1.0.post8", "2.1.0.post17"), ("2.1.0.post17", "2.3.1"), ("2.9.0.post9", "2.9.1"), ("2.13.0", "2.13.0.post1"),
    ("0.9.1rc1", "0.9.1"), ("0.9.0.dev0", "0.9.0a1"), ("2.10.0", "2.10.0.post0"), ("2.9", "2.10"),
])  # fmt: skip
def test_version_order(lo: str, hi: str) -> None:
    assert version_key(lo) < version_key(hi)


def test_version_equal_forms() -> None:
    assert version_key("2.1") == version_key("2.1.0") == version_key("2.1.0+cpu") == version_key("v2.1.0")


def test_known_behaviour_lookup() -> None:
    """Names in any spelling; unread releases between rows are unknown."""
    assert known_behaviour("torch-npu", "2.13.0") is known_behaviour("torch_npu", "2.13.0")
    assert known_behaviour("torch_npu", "2.6.0.post3") is None  # not read: between two shapes
    assert known_behaviour("torch_npu", "3.0.0") is None
    assert known_behaviour("not_a_plugin", "1.0") is None


def test_advice_sentences() -> None:
    """The nested-pools finding's sentence names the dist, version, behaviour and a fix."""
    text = advice_for("torch_npu", "2.13.0")
    assert text and text.startswith("torch_npu 2.13.0 calls AsyncCompile.warm_pool()")
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in text and "does not nest" in text
    old = advice_for("torch_npu", "2.1.0.post8")
    assert old and "never calls warm_pool()" in old
    assert advice_for("torch_npu", "2.6.0.post3") is None
    frame = {"file": "/x/torch_npu/_inductor/__init__.py", "line": 18, "func": "<module>", "dist": "torch_npu",
             "dist_version": "2.13.0", "rel": "torch_npu/_inductor/__init__.py"}
    assert advice_for_frame(frame) == text
    assert advice_for_frame({"file": "x.py", "line": 1, "func": "f"}) is None
    assert advice_for_frame(None) is None


def _wheel(tmp_path: Path, name: str) -> Path:
    """Zip a fixture plugin folder as a wheel (the tool only reads members)."""
    root = FIXTURES / name
    wheel = tmp_path / f"{name}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, path.relative_to(root).as_posix())
    return wheel


@pytest.mark.parametrize("name,shape,nests", [
    ("wp_fx_reset", "import-warm-reset-gated", "no"),
    ("wp_fx_plain", "import-warm", "yes"),
    ("wp_fx_subclass", "subclass-pool", "no"),
    ("wp_fx_jobs", "import-warm-reset", "no"),
])  # fmt: skip
def test_tool_reads_fixture_shapes(tmp_path: Path, name: str, shape: str, nests: str) -> None:
    """The tool's import walk and verdicts on the three stand-in shapes."""
    rel = TOOL.analyse(name, "0.1", _wheel(tmp_path, name))
    assert rel.entry == f"{name}:_autoload"
    assert TOOL.shape(rel) == shape
    assert TOOL.nesting(rel).startswith(nests)
    if name == "wp_fx_reset":
        (warm,) = rel.at_import
        assert warm.file == "wp_fx_reset/_inductor/__init__.py" and warm.gate == "TORCH_WARM_POOL"
        assert warm.autoload.startswith("'0'") and warm.chain[-1] == "wp_fx_reset._inductor"
    if name == "wp_fx_subclass":
        (sub,) = [s for s in rel.sites if s.kind == "subclass"]
        verdict = TOOL.caught(sub, rel.imports[sub.file])
        assert verdict == "subclass rule wraps DeviceAsyncCompile.process_pool"
        pools = [s for s in rel.sites if s.name == "SubprocPool"]
        assert pools and TOOL.caught(pools[0], {}).startswith("yes: SubprocPool.__init__")


def test_summary_rows_render_and_parse_back(tmp_path: Path) -> None:
    """render() and parse_summary() agree: what the test reads is what the tool writes."""
    rels = [TOOL.analyse(n, "0.1", _wheel(tmp_path, n)) for n in ("wp_fx_plain", "wp_fx_reset")]
    text = TOOL.render(rels, ["a note"], "2026-01-01")
    assert TOOL.parse_summary(text) == [("wp_fx_plain", "0.1", "import-warm"),
                                        ("wp_fx_reset", "0.1", "import-warm-reset-gated")]


def test_advice_for_a_nesting_release(monkeypatch: pytest.MonkeyPatch) -> None:
    """No release read nests; a row that did would name the guard as the way out."""
    from wp_autotrace.analysis.derive import plugins

    row = plugins.Behaviour("wp_fx_plain", "0.1", "0.2", "import-warm",
                            "calls warm_pool() at import without keeping itself out of sidecars",
                            "Upgrade to a release that resets TORCH_DEVICE_BACKEND_AUTOLOAD around it", nests=True)
    monkeypatch.setattr(plugins, "PLUGINS", (row,))
    assert plugins.advice_for("wp-fx-plain", "0.1.5") == (
        "wp-fx-plain 0.1.5 calls warm_pool() at import without keeping itself out of sidecars. Upgrade to a "
        "release that resets TORCH_DEVICE_BACKEND_AUTOLOAD around it (or run with WP_AUTOTRACE_GUARD=nested-pools).")
