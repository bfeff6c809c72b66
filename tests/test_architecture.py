"""The floor plan as code: the layers docs/architecture.md lists are import-linter's contract, and
no two files of the project import each other, directly or round a loop (``make lint`` runs the
contract itself; this keeps the document in step and adds the file cycles it does not check)."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("replicator", "ingest", "lakehouse", "dashboards", "mirrorlake")


def _contract(name: str) -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["name"] == name]
    return contract["layers"]


def test_the_documented_layers_are_the_enforced_ones():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc.split("## Inside `replicator/`: layers, enforced", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\d+\. `([^`]+)`", section, re.MULTILINE)
    assert listed == _contract("replicator/ in layers")


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected sets of two modules or more (Tarjan), each one an import loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_two_files_import_each_other():
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
    assert _cycles(graph) == []


def test_a_loop_is_found_when_there_is_one():
    graph = grimp.ImportGraph()
    for a, b in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        graph.add_import(importer=a, imported=b)
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


# What the flow's core may import: the standard library's pure parts, and the project's pure layers
_CORE_MAY_IMPORT = re.compile(
    r"^(__future__|bisect|collections(\.abc)?|dataclasses|enum|logging|typing|"
    r"replicator\.(client|events|errors|text)(\..*)?|replicator\.flow\.core(\..*)?)$"
)


def test_the_flow_core_has_no_io_no_thread_and_no_clock():
    """``replicator/flow/core`` is driven by the runner and by the simulator alike: it may not reach a
    client, a thread, a clock or a socket, directly or through another module of the project."""
    import ast

    found = []
    for path in sorted((ROOT / "replicator" / "flow" / "core").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            found += [(path.name, n) for n in names if not _CORE_MAY_IMPORT.match(n)]
    assert found == []
