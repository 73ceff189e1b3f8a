"""The joined start module (tools/join_start.py): current with START's sources, and a join that refuses what it
would change the meaning of (each refusal on a source changed in memory, the rest as they are)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import join_start  # noqa: E402


def test_the_joined_module_is_current() -> None:
    """What the tool writes now is what is checked in, and its first line fingerprints the sources as they are."""
    assert join_start.OUT.read_text() == join_start.join(), "START's sources changed: run python tools/join_start.py"
    from wp_autotrace import packwrite

    assert packwrite.is_joined_from(str(join_start.OUT), [str(join_start.source_path(n)) for n in join_start.SOURCES])


def test_each_source_line_is_at_its_banner_offset() -> None:
    """A traceback's line in the joined module leads to its source's line: the banner says by how much."""
    lines = join_start.OUT.read_text().splitlines()
    banners = [(i, line) for i, line in enumerate(lines, 1) if line.startswith("# ---- wp_autotrace/")]
    assert [line.split()[2].rstrip(":") for _, line in banners] == [
        str(join_start.source_path(n).relative_to(ROOT)) for n in join_start.SOURCES]
    for at, banner in banners:
        source = (ROOT / banner.split()[2].rstrip(":")).read_text().splitlines()
        offset = int(banner.split()[-2])
        assert offset == at
        kept = [n for n in range(1, len(source) + 1) if lines[offset + n - 1].strip()]
        assert len(kept) > len(source) // 2
        # a line kept whole (no name, import or annotation changed on it) is its source's line
        assert sum(lines[offset + n - 1] == source[n - 1] for n in kept) > len(kept) * 3 // 4


def test_no_docstring_or_annotation_is_left() -> None:
    tree = ast.parse(join_start.OUT.read_text())
    left = [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.AnnAssign) or (isinstance(node, ast.arg) and node.annotation is not None)
            or (isinstance(node, (ast.FunctionDef, ast.ClassDef)) and (ast.get_docstring(node) is not None
                                                                        or getattr(node, "returns", None)))]
    assert not left


def _joined_with(name: str, edit: str) -> str:
    text = join_start.source_path(name).read_text()
    return join_start.join({name: text + edit})


@pytest.mark.parametrize(("name", "edit", "says"), [
    # a name bound in two sources otherwise: one of them would rebind the other's
    ("wp_autotrace.common.redact", "\nMAIN = 'main2'\n", "MAIN is bound by wp_autotrace.common.core too"),
    # ... also where the statement binds it after a def of its own (an if's body)
    ("wp_autotrace.common.redact", "\nif True:\n    def _f():\n        pass\n    MAIN = 'x'\n",
     "MAIN is bound by wp_autotrace.common.core too"),
    # a builtin read in one source and bound in another: it would find the other's global
    ("wp_autotrace.common.core", "\ndef len(x):\n    return 0\n", "uses len, which wp_autotrace.common.core binds"),
    # a global a function writes (`global`) that another source binds: it would rebind the other's
    ("wp_autotrace.common.redact", "\ndef _g():\n    global MAIN\n    MAIN = 'x'\n",
     "uses MAIN, which wp_autotrace.common.core binds"),
    # the module's own attributes: the joined module's, not the source's
    ("wp_autotrace.runtime.sink", "\nSPEC = __spec__\n", "__spec__ would be the joined module's"),
    ("wp_autotrace.runtime.sink", "\nG = globals()\n", "globals() would be the joined module's"),
    ("wp_autotrace.common.env", "\nHERE = __file__\n", "__file__ other than its folder's"),
    ("wp_autotrace.runtime.bootstrap", "\nfrom .sink import warn as say\n", "warn is not wp_autotrace.runtime.sink's"),
    ("wp_autotrace.runtime.bootstrap", "\nfrom __future__ import annotations\n", "a __future__ import"),
])
def test_the_join_refuses_what_it_would_change(name: str, edit: str, says: str) -> None:
    with pytest.raises(join_start.JoinError, match=says.replace("(", r"\(").replace(")", r"\)")):
        _joined_with(name, edit)


def test_the_module_s_names_are_its_sources_and_the_same_statement_is_made_once() -> None:
    """__name__ and __package__ become the source's own strings; an `import os` in each source is kept once."""
    text = _joined_with("wp_autotrace.common.redact", "\nWHO = __name__, __package__\nimport os\n")
    assert "WHO = 'wp_autotrace.common.redact', 'wp_autotrace.common'" in text
    assert text.count("\nimport os\n") == 1


def test_the_fingerprint_tells_a_swap_of_two_bytes_and_one_byte_changed(tmp_path: Path) -> None:
    """The checksum's weights 256**i never repeat within 2 MiB (256's order modulo its prime is over 2**21), so a
    swap of two different bytes at any distance, or any one byte changed, gives another fingerprint."""
    from wp_autotrace import packwrite

    weight = 1
    for _ in range(1, 1 << 21):
        weight = weight * 256 % packwrite._PRIME
        assert weight != 1
    source = tmp_path / "s.py"
    data = bytes(range(256)) * 40
    source.write_bytes(data)
    before = packwrite.joined_from([str(source)])
    for i, j in ((1000, 1061), (0, 4097), (7, 7 + 127)):
        swapped = bytearray(data)
        swapped[i], swapped[j] = swapped[j], swapped[i]
        source.write_bytes(bytes(swapped))
        assert packwrite.joined_from([str(source)]) != before, (i, j)
    source.write_bytes(data[:-1] + b"x")
    assert packwrite.joined_from([str(source)]) != before
