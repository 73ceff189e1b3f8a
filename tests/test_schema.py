"""The schema is the one home of event names and fields: docs/log-schema.md, sink and reader agree with it."""

from __future__ import annotations

from pathlib import Path

from wp_autotrace.analysis.read import check, logread, schema
from wp_autotrace.runtime import sink

SCHEMA_DOC = Path(__file__).resolve().parent.parent / "docs" / "log-schema.md"


def test_schema_doc_table_is_generated_from_schema() -> None:
    """docs/log-schema.md's table is exactly schema.markdown_table() (regenerate it from there)."""
    text = SCHEMA_DOC.read_text()
    start = text.index("-->\n", text.index("<!-- schema:start")) + 4
    end = text.index("<!-- schema:end -->")
    assert text[start:end] == schema.markdown_table(), (
        "docs/log-schema.md's table is stale: paste python -c 'from wp_autotrace.analysis.read.schema import "
        "markdown_table; print(markdown_table())' between the schema markers")


def test_one_version_and_every_event_checked() -> None:
    """The writer's version is the schema's; the reader knows every event and every field type."""
    assert sink.SCHEMA_VERSION == schema.SCHEMA_VERSION
    assert frozenset(schema.EVENTS) == logread.KNOWN_EVENTS
    kinds = {kind for types in schema.FIELD_TYPES.values() for kind in types.values()}
    assert kinds <= set(check.CHECKS)


def test_model_has_a_handler_per_event() -> None:
    """A new event in the schema needs its visit_<event> in the model, or a Registry visit (else the fold fails
    loudly)."""
    from wp_autotrace.analysis.fold.fold import REGISTRY_VISITS, Builder

    assert all(callable(getattr(Builder, "visit_" + event, None)) or callable(REGISTRY_VISITS.get(event))
               for event in schema.EVENTS)


def test_every_target_row_has_a_tag_and_labels_round_trip() -> None:
    """Each table row says what it means; labels are built and split in one place."""
    from wp_autotrace.common import targets as T

    assert all(t.tag and t.tag != T.USER_TAG for t in T.TARGETS)
    for t in T.TARGETS:
        assert T.split_label(t.label) == (t.module, t.qualname)
    assert T.short_label("torch._inductor.async_compile:AsyncCompile.warm_pool") == "AsyncCompile.warm_pool"


def test_every_emitted_event_and_field_is_in_the_schema() -> None:
    """Each `emit(EVENT, field=...)` (or `emit_encoded`, `emit_parts`) in the package names a schema event
    and its fields, EVENT spelled through common/vocab.py (`V.TREE`, `vocab.CALL`, an imported `RUN_EXIT`)
    or as a literal (runtime/ still spells some so).

    This keeps the writers in step with the one home, so a new event or field cannot be silently dropped
    by the reader.
    """
    import ast

    from wp_autotrace.common import vocab

    def event_of(arg: ast.expr) -> object:
        if isinstance(arg, ast.Constant):
            return arg.value
        if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id in ("V", "vocab"):
            return getattr(vocab, arg.attr, None)
        if isinstance(arg, ast.Name) and arg.id.isupper():
            return getattr(vocab, arg.id, None)
        return arg  # a forwarding function's parameter: its callers are checked

    package = Path(schema.__file__).parent.parent.parent
    seen = set()
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("emit", "emit_encoded", "emit_parts") and node.args):
                continue
            event = event_of(node.args[0])
            if isinstance(event, ast.expr):
                continue
            assert event in schema.EVENTS, f"{path.name}:{node.lineno}: unknown event {ast.unparse(node.args[0])}"
            for kw in node.keywords:
                if kw.arg is not None:
                    assert kw.arg in schema.FIELD_TYPES[event], f"{path.name}:{node.lineno}: {event}.{kw.arg}"
            seen.add(event)
    # The writers of the main events are found (the scan itself works), literal or through vocab.
    assert {"call", "return", "process_exit", "error", "tree", "watcher_exit", "run_exit", "memory"} <= seen
