"""README is a user's page: short, install near the top, the two set-up commands, every setting named,
and every link in README and docs/ leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wp_autotrace.common import env

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAX_LINES = 250
# Install is the second section: right after what the tool is.
INSTALL_BY_LINE = 30
SETUP_COMMANDS = ("bash examples/run.sh", "bash .ci/run")
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_readme_is_short_with_install_near_the_top() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES
    assert "## Install" in lines[:INSTALL_BY_LINE]
    block = "\n".join(lines[lines.index("## Install"):]).split("```", 2)[1]
    assert any(line.split("#")[0].strip() == "pip install ." for line in block.splitlines())  # from a checkout


def test_readme_gives_the_two_setup_commands() -> None:
    """Exactly these two commands set up a fresh machine: trace the example, run the tests."""
    text = README.read_text()
    for command in SETUP_COMMANDS:
        assert f"`{command}`" in text
        assert (ROOT / command.split()[1]).is_file()


def test_every_setting_is_in_readme() -> None:
    """Each WP_AUTOTRACE* variable common/env.py names is in README's Settings table."""
    settings = README.read_text().split("## Settings", 1)[1].split("\n## ", 1)[0]
    names = {v for k, v in vars(env).items() if k.endswith("_ENV") and isinstance(v, str)}
    assert names and all(f"`{name}`" in settings for name in names), sorted(n for n in names if n not in settings)


@pytest.mark.parametrize("page", [README, *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = [target for target in _LINK.findall(page.read_text())
              if "://" not in target and not (page.parent / target).exists()]
    assert not broken
