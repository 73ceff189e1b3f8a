"""Exit statuses have one home, cli/main.py's EXIT_STATUSES: the help and README are made from it,
and every status a command returns is in it."""

from __future__ import annotations

import ast
from pathlib import Path

from wp_autotrace.cli import main

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "<!-- exit-statuses: generated from wp_autotrace/cli/main.py EXIT_STATUSES; do not edit -->"
END = "<!-- /exit-statuses -->"


def readme_block() -> str:
    text = (ROOT / "README.md").read_text()
    assert BEGIN in text and END in text, "README lost its exit-statuses markers"
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def test_readme_table_is_the_generated_one() -> None:
    """Regenerate with: python -c 'from wp_autotrace.cli.main import exit_status_table; print(exit_status_table())'."""
    assert readme_block() == main.exit_status_table()


def test_help_lists_every_status() -> None:
    help_text = main.build_parser().format_help()
    for status in main.EXIT_STATUSES:
        assert f"{status.code:>6}  {status.commands.replace('`', '')}:" in help_text


def _returned_statuses(module: object) -> set[int]:
    """Every int a function of module returns by name (a module constant) or as a literal."""
    path = Path(module.__file__)  # type: ignore[attr-defined]
    found: set[int] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Return) and node.value is not None:
            value = node.value
            if isinstance(value, ast.Name) and isinstance(getattr(module, value.id, None), int):
                found.add(getattr(module, value.id))
            elif isinstance(value, ast.Constant) and type(value.value) is int:
                found.add(value.value)
    return found


def test_every_returned_status_is_in_the_table() -> None:
    """A command returning a status the table does not explain fails here (run's program code aside)."""
    codes = {int(s.code) for s in main.EXIT_STATUSES if s.code.isdigit()}
    for module in (main, *main.COMMAND_MODULES):
        assert _returned_statuses(module) - codes == set(), module.__name__
