"""The documentation stays true to the code: every setting and every `kb` command is documented, the README
stays short, links lead somewhere, and the generated pages match the JSON they are rendered from."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.paths import REPO

from kb_core.cli import command_names
from kb_core.settings import _YAML_KEYS, Settings

README = REPO / "README.md"
DOCS = REPO / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _env_var(name: str) -> str:
    """The variable a user sets: each field's description starts with it (KB_CONFIG for `config_file`)."""
    found = re.match(r"(KB_[A-Z0-9_]+)", Settings.model_fields[name].description or "")
    return found.group(1) if found else f"KB_{name.upper()}"


def _settings_table() -> dict[str, str]:
    """README's settings table: env var -> its row."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and (m := re.fullmatch(r"`(KB_[A-Z0-9_]+)`", cells[0])):
            rows[m.group(1)] = line
    return rows


def test_every_setting_is_in_the_readme_table():
    table = _settings_table()
    missing = [f"{name} ({_env_var(name)})" for name in Settings.model_fields if _env_var(name) not in table]
    assert missing == [], f"settings missing from README's table: {missing}"
    unknown = set(table) - {_env_var(name) for name in Settings.model_fields}
    assert unknown == set(), f"README documents settings that do not exist: {unknown}"


def test_the_table_names_each_yaml_key():
    table = _settings_table()
    for keys, name in _YAML_KEYS.items():
        assert f"`{'.'.join(keys)}`" in table[_env_var(name)], f"{name}: YAML key {'.'.join(keys)} not in its row"


def test_every_kb_command_is_documented():
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    names = command_names()
    assert names, "the parser has no subcommands"
    undocumented = [name for name in names if not re.search(rf"`kb {re.escape(name)}\b", text)]
    assert undocumented == [], f"kb commands not mentioned in README.md or docs/: {undocumented}"


def test_readme_is_short():
    size = README.stat().st_size
    assert size <= 10_240, f"README.md is {size} bytes; move reference material to docs/"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*$", text, flags=re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_lead_to_existing_files(page):
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target} (no heading #{anchor})")
    assert broken == [], f"{page.name}: broken links {broken}"


def test_generated_pages_are_up_to_date():
    from benchmarks.make_docs import rendered

    stale = [path.name for path, text in rendered(DOCS).items()
             if not path.is_file() or path.read_text(encoding="utf-8") != text]
    assert stale == [], f"re-render with `python -m benchmarks.make_docs` and commit: {stale}"
