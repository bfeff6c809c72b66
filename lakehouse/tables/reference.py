"""The lakehouse's reference, generated: every gold table (its contract, from its spec) and every
named SQL rule, so the documentation cannot drift from the code (``make docs`` writes
``docs/lakehouse-reference.md``; a test holds the file equal to this output)."""

from __future__ import annotations

import importlib
from pathlib import Path

from lakehouse.tables import GOLD_SPECS
from lakehouse.tables.macros import MACROS

__all__ = ["reference_markdown", "write_reference"]


def _summary(name: str) -> str:
    doc = importlib.import_module(f"lakehouse.tables.{name}").__doc__ or ""
    text = " ".join(doc.split("\n\n", 1)[0].split())
    return text.removeprefix(f"Gold ``{name}``'s contract: ").removeprefix(f"Gold ``{name}``' contract: ")


def _names(values: tuple[str, ...]) -> str:
    return ", ".join(f"`{v}`" for v in values) or "none"


def reference_markdown() -> str:
    """Markdown: a table of the gold tables in build order, then the SQL rules."""
    lines = [
        "# Lakehouse reference",
        "",
        "Generated from `lakehouse/tables/` by `make docs` (`tests/test_docs.py` keeps it current). "
        "Every gold table is a view in `mirrorlake sql`, in build order; its key groups the rows an "
        "incremental build recomputes together.",
        "",
        "| gold table | what a row is | key | reads silver | reads gold |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| `{s.name}` | {_summary(s.name)} | {_names(s.key)} | {_names(s.sources)} | {_names(s.depends_on)} |"
        for s in GOLD_SPECS
    ]
    lines += ["", "| SQL rule | answers | reads |", "|---|---|---|"]
    lines += [f"| `{m.name}` | {m.answers} | {_names(m.reads)} |" for m in MACROS]
    return "\n".join(lines) + "\n"


def write_reference(path: str | Path) -> None:
    """Write ``reference_markdown()`` to ``path``."""
    Path(path).write_text(reference_markdown(), encoding="utf-8")
