"""Every Python name the README and docs/ show a user imports (issue 61 item 5).

``from replicator.client import FailoverConsumer``, as the README wrote it, raised ImportError (it
lived in ``replicator.client.failover_consumer`` only). Checked here: each ``from X import Y`` line
of the documents, and each backticked dotted name of the project's packages ending in a class name
(``replicator.client.FailoverConsumer``): the module imports and has the name.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_PACKAGES = r"(?:replicator|ingest|lakehouse|dashboards|mirrorlake)"
_DOTTED_CLASS = re.compile(rf"`({_PACKAGES}(?:\.[a-z_][a-z0-9_]*)*)\.([A-Z][a-z]\w+)`")
_FROM_IMPORT = re.compile(rf"^\s*from ({_PACKAGES}[\w.]*) import ([\w, ]+)$", re.MULTILINE)


def _documented() -> list[tuple[str, str, str]]:
    """(document, module, name) of every name a user is shown importing."""
    found = set()
    for path in DOCUMENTS:
        text = path.read_text()
        found |= {(path.name, module, name) for module, name in _DOTTED_CLASS.findall(text)}
        for module, names in _FROM_IMPORT.findall(text):
            found |= {(path.name, module, n.strip()) for n in names.split(",") if n.strip()}
    return sorted(found)


def test_the_documents_show_names_to_import():
    assert ("README.md", "replicator.client", "FailoverConsumer") in _documented()


@pytest.mark.parametrize(("document", "module", "name"), _documented())
def test_a_documented_name_imports(document: str, module: str, name: str):
    imported = importlib.import_module(module)
    assert hasattr(imported, name), f"{document}: {module} has no {name}"
