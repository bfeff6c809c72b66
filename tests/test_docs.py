"""The README and docs/ stay a map of the code: every link resolves, the README's Layout names
every top-level folder, and every documented gold table and SQL rule exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_every_relative_link_resolves():
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_the_readme_maps_every_doc_and_its_layout_every_folder():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for doc in (ROOT / "docs").glob("*.md"):
        assert f"docs/{doc.name}" in readme, doc.name
    layout = readme.split("## Layout", 1)[1]
    folders = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders <= {name.rstrip("/") for name in re.findall(r"^(\w+)/", layout, re.MULTILINE)}, folders


def test_the_lakehouse_reference_is_the_generated_one_and_names_every_table_and_rule():
    from lakehouse.tables import GOLD_SPECS
    from lakehouse.tables.macros import MACROS
    from lakehouse.tables.reference import reference_markdown

    page = (ROOT / "docs" / "lakehouse-reference.md").read_text(encoding="utf-8")
    assert page == reference_markdown(), "run `make docs` and commit the result"
    missing = [s.name for s in GOLD_SPECS if f"| `{s.name}` |" not in page]
    missing += [m.name for m in MACROS if f"| `{m.name}` |" not in page]
    assert missing == []
