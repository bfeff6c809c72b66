"""Malformed input, table-driven: every row is an ``error:`` naming the file (and key), a non-zero exit,
and no traceback. The CLI runs in-process (``mirrorlake.cli.main``): an exception other than a
``MirrorlakeError`` would escape ``main`` and fail the row, so "no traceback" is checked by construction.

Covered elsewhere, cited rather than repeated: corrupt and foreign records in the state topic
become quarantine rows and leave the good events in place (``tests/test_end_to_end.py::
test_rebuild_is_idempotent_and_bad_records_are_quarantined`` with Spark, ``tests/test_state_reader.py``
for the replicator's own reader); a lakehouse build killed mid-commit (``tests/test_lakehouse_recovery.py``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mirrorlake.cli import main

A_B = "clusters:\n  A: {bootstrap_servers: '127.0.0.1:1'}\n  B: {bootstrap_servers: '127.0.0.1:3'}\n"
PROPS = "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:3\n"
Content = str | bytes | Callable[[Path], object]


@dataclass(frozen=True)
class Bad:
    """One malformed input: ``content`` written to ``name`` in a fresh directory, then ``args`` run
    (``{path}`` is the written file, ``{dir}`` the directory); the exit code and the needles of stderr."""

    id: str
    content: Content
    needles: tuple[str, ...]
    name: str = "conf.yaml"
    args: tuple[str, ...] = ("replicate", "{path}")
    code: int = 2
    names_file: bool = True


def _stored_bad(what: str, text: str, needle: str) -> Bad:
    """``translate --offsets`` given ``text``: exit 20 (a translation error) with ``needle``."""
    args = ("translate", "-c", "{path}", "--flow", "A->B", "--offsets", "{dir}/offsets.txt")
    return Bad(f"translate --offsets: {what}", _stored_offsets(text), (needle,), code=20, names_file=False, args=args)


def _stored_offsets(text: str) -> Callable[[Path], object]:
    """A config with flow A->B at ``path`` and ``text`` beside it as ``offsets.txt`` (translate --offsets)."""

    def write(path: Path) -> None:
        path.write_text(A_B + "flows: [{source: A, target: B, topics: [t]}]\n")
        (path.parent / "offsets.txt").write_text(text)

    return write


def _huge(path: Path) -> None:
    with path.open("w") as f:
        f.write(A_B)
        line = "# " + "x" * 1022 + "\n"
        for _ in range(11 * 1024):  # 11 MiB of comments
            f.write(line)


def _delta_table(root: Path, *, truncate_log: bool = False, lost_checkpoint: bool = False) -> None:
    """A one-file Delta table ``tables/gold/rpo`` written by hand (no Spark), its log cut mid-line if asked,
    or (``lost_checkpoint``) its ``_last_checkpoint`` naming a checkpoint of version 3 that is gone, as are
    commits 1 to 3 (log cleanup removes the commits a checkpoint covers)."""
    table = root / "tables" / "gold" / "rpo"
    (table / "_delta_log").mkdir(parents=True)
    pq.write_table(pa.table({"flow": ["A->B"], "rpo_ms": [5]}), table / "part-0.parquet")
    schema = {
        "type": "struct",
        "fields": [
            {"name": "flow", "type": "string", "nullable": True, "metadata": {}},
            {"name": "rpo_ms", "type": "long", "nullable": True, "metadata": {}},
        ],
    }
    size = (table / "part-0.parquet").stat().st_size
    actions = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": {"id": "00000000-0000-0000-0000-000000000001", "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(schema), "partitionColumns": [], "configuration": {},
                      "createdTime": 0}},
        {"add": {"path": "part-0.parquet", "partitionValues": {}, "size": size, "modificationTime": 0,
                 "dataChange": True}},
    ]  # fmt: skip
    text = "\n".join(json.dumps(a) for a in actions) + "\n"
    (table / "_delta_log" / "00000000000000000000.json").write_text(text[: len(text) // 2] if truncate_log else text)
    if lost_checkpoint:
        (table / "_delta_log" / "_last_checkpoint").write_text('{"version":3,"size":3}')


def _lakehouse_with_bad_table(path: Path) -> None:
    _lakehouse_at("{dir}/lh")(path)
    _delta_table(path.parent / "lh", truncate_log=True)


def _lakehouse_at(lakehouse: str) -> Callable[[Path], object]:
    def write(path: Path) -> None:
        path.write_text(A_B + f"lakehouse: {{path: '{lakehouse.format(dir=path.parent)}'}}\n")

    return write


def _a_file_where_a_dir_goes(path: Path) -> None:
    (path.parent / "not-a-dir").write_text("a file")
    _lakehouse_at("{dir}/not-a-dir/lakehouse")(path)


CASES = [
    # -- YAML: empty, garbage, huge
    Bad("empty file", "", ("the file is empty",)),
    Bad("comments only", "# nothing here\n", ("the file is empty",)),
    Bad("binary garbage", bytes(range(256)) * 4, ("not UTF-8 text",)),
    Bad("UTF-16 text", A_B.encode("utf-16"), ("not UTF-8 text",)),
    Bad("control characters", "clusters: \x00\x01\n", ("not valid YAML",)),
    Bad("huge file", _huge, ("larger than 10 MiB",)),
    Bad("tab indentation", "clusters:\n\tA: {bootstrap_servers: x}\n", ("not valid YAML",)),
    Bad("unclosed bracket", "clusters: [1, 2\n", ("not valid YAML",)),
    Bad("top-level list", "- a\n- b\n", ("expected a mapping at the top level", "list")),
    Bad("top-level scalar", "hello\n", ("expected a mapping at the top level", "str")),
    # -- YAML: unknown keys, wrong types, bad values
    Bad("unknown top-level key", A_B + "flowz: []\n", ("flowz: unknown key",)),
    Bad("unknown flow key", A_B + "flows:\n  - {source: A, target: B, topicz: [x]}\n",
        ("flows.0.topicz: unknown key",)),
    Bad("unknown cluster key", "clusters:\n  A: {bootstrap_servers: x, sasl: y}\n", ("clusters.A.sasl: unknown key",)),
    Bad("missing clusters", "flows: []\n", ("clusters: required key is missing",)),
    Bad("missing bootstrap_servers", "clusters:\n  A: {}\n", ("clusters.A.bootstrap_servers: required key",)),
    Bad("empty bootstrap_servers", "clusters:\n  A: {bootstrap_servers: ''}\n", ("clusters.A.bootstrap_servers",)),
    Bad("bootstrap_servers a number", "clusters:\n  A: {bootstrap_servers: 9092}\n", ("clusters.A.bootstrap_servers",)),
    Bad("clusters a list", "clusters: [A, B]\n", ("clusters:",)),
    Bad("no cluster at all", "clusters: {}\n", ("at least one cluster is required",)),
    Bad("flows a mapping", A_B + "flows: {source: A, target: B}\n", ("flows:",)),
    Bad("offset_lag_max a word", A_B + "flows:\n  - {source: A, target: B, offset_lag_max: many}\n",
        ("flows.0.offset_lag_max", "many")),
    Bad("exactly_once a word", A_B + "flows:\n  - {source: A, target: B, exactly_once: maybe}\n",
        ("flows.0.exactly_once", "maybe")),
    Bad("negative interval", A_B + "flows:\n  - {source: A, target: B, sync_interval_seconds: -1}\n",
        ("flows.0.sync_interval_seconds",)),
    Bad("status_port out of range", A_B + "status_port: 70000\n", ("status_port",)),
    Bad("client setting a list", "clusters:\n  A: {bootstrap_servers: x, client: {sasl.password: [1, 2]}}\n",
        ("clusters.A.client.sasl.password",)),
    Bad("empty policy separator", A_B + "replication_policy: {separator: ''}\n", ("replication_policy.separator",)),
    Bad("unknown policy class", A_B + "replication_policy: {class: 'no_such_module:Policy'}\nflows:\n"
        "  - {source: A, target: B}\n", ("replication_policy.class", "no_such_module")),
    Bad("unset secret variable",
        "clusters:\n  A: {bootstrap_servers: x, client: {sasl.password: '${env:ML_UNSET_X}'}}\n"
        "  B: {bootstrap_servers: y}\nflows:\n  - {source: A, target: B}\n", ("ML_UNSET_X",), names_file=False),
    # -- YAML: aliases, flows, cycles, regexes
    Bad("duplicate cluster alias", "clusters:\n  A: {bootstrap_servers: x}\n  A: {bootstrap_servers: y}\n",
        ("duplicate key 'A' (line 3",)),
    Bad("duplicate top-level key", A_B + "flows: []\nflows: []\n", ("duplicate key", "'flows'")),
    Bad("alias with a space", "clusters:\n  'A B': {bootstrap_servers: x}\n", ("cluster alias 'A B'",)),
    Bad("flow to an unknown cluster", A_B + "flows:\n  - {source: A, target: Q}\n", ("unknown cluster 'Q'", "A, B")),
    Bad("flow from a cluster to itself", A_B + "flows:\n  - {source: A, target: A}\n", ("both 'A'",)),
    Bad("flow declared twice", A_B + "flows:\n  - {source: A, target: B}\n  - {source: A, target: B}\n",
        ("declared twice",)),
    Bad("cycle under the identity policy", A_B + "replication_policy: {class: identity}\nprovenance_header: false\n"
        "flows:\n  - {source: A, target: B}\n  - {source: B, target: A}\n", ("form a cycle",)),
    Bad("bad topic regex", A_B + "flows:\n  - {source: A, target: B, topics: ['orders[']}\n",
        ("flows.0.topics", "invalid regular expression")),
    Bad("bad groups_exclude regex", A_B + "flows:\n  - {source: A, target: B, groups_exclude: ['(']}\n",
        ("flows.0.groups_exclude", "invalid regular expression")),
    Bad("bad config exclude regex", A_B + "flows:\n  - {source: A, target: B, config_properties_exclude: ['*x']}\n",
        ("flows.0.config_properties_exclude",)),
    # patterns run in linear time (RE2): what needs backtracking is refused, naming the construct
    Bad("backreference in topics", A_B + "flows:\n  - {source: A, target: B, topics: ['(a)\\1']}\n",
        ("flows.0.topics", "a backreference", "linear time")),
    Bad("lookahead in groups", A_B + "flows:\n  - {source: A, target: B, groups: ['(?!tmp).*']}\n",
        ("flows.0.groups", "a negative lookahead (?!...) is not supported")),
    Bad("possessive quantifier", A_B + "flows:\n  - {source: A, target: B, topics_exclude: ['a*+']}\n",
        ("flows.0.topics_exclude", "a possessive quantifier")),
    Bad("lookbehind in MM2 properties", PROPS + "A->B.enabled = true\nA->B.topics = (?<=x)y\n",
        ("A->B.topics", "a lookbehind (?<=...) is not supported"), name="mm2.properties"),
    # -- MM2 properties
    Bad("empty properties", "", ("clusters is required",), name="mm2.properties"),
    Bad("properties binary garbage", bytes(range(256)) * 4, ("mm2.properties",), name="mm2.properties"),
    Bad("properties without bootstrap", "clusters = A, B\nA->B.enabled = true\n", ("bootstrap",),
        name="mm2.properties"),
    Bad("properties duplicate alias", "clusters = A, A\nA.bootstrap.servers = x\n", ("'A' listed twice",),
        name="mm2.properties"),
    Bad("properties flow to unknown cluster", PROPS + "A->C.enabled = true\n", ("unknown cluster 'C'",),
        name="mm2.properties"),
    Bad("properties bad regex", PROPS + "A->B.enabled = true\nA->B.topics = orders[\n", ("orders[",),
        name="mm2.properties"),
    Bad("properties wrong type", PROPS + "A->B.enabled = true\nA->B.offset.lag.max = many\n", ("offset",),
        name="mm2.properties"),
    Bad("properties unknown key", PROPS + "A->B.enabled = true\nA->B.topicz = x\n", ("topicz",),
        name="mm2.properties"),
    Bad("properties malformed unicode escape", PROPS + "x = \\uZZZZ\n", ("malformed \\uxxxx",),
        name="mm2.properties"),
    Bad("properties huge file", lambda p: p.write_bytes(PROPS.encode() + b"#" * (11 << 20)), ("larger than",),
        name="mm2.properties"),
    Bad("properties flow to itself", PROPS + "A->A.enabled = true\n", ("A->A",), name="mm2.properties"),
    # -- mirrorlake check: an unreachable cluster is one line, not a table
    Bad("check with a cluster that does not answer", A_B + "flows:\n  - {source: A, target: B}\n"
        "connect_timeout_seconds: 0.5\n", ("cluster A at 127.0.0.1:1 did not answer",), args=("check", "{path}"),
        code=3, names_file=False),
    Bad("check of an unknown flow", A_B + "flows:\n  - {source: A, target: B}\n", ("unknown flow 'B->A'",),
        args=("check", "{path}", "--flow", "B->A"), names_file=False),
    # -- lakehouse paths and Delta logs (DuckDB and plain file checks; no Spark)
    Bad("sql on a lakehouse path that is a file", "not a directory", ("{path}",),
        args=("sql", "SELECT 1", "--lakehouse", "{path}"), code=12, names_file=False),
    Bad("sql on a truncated Delta log", lambda p: _delta_table(p.parent / "lh", truncate_log=True),
        ("rpo is not a readable Delta table", "Truncated", "rpo/_delta_log/00000000000000000000.json: line 2",
         "move the lakehouse directory aside"),
        args=("sql", "SELECT * FROM rpo", "--lakehouse", "{dir}/lh"),
        code=12, names_file=False),
    Bad("sql on a Delta log whose checkpoint is gone", lambda p: _delta_table(p.parent / "lh", lost_checkpoint=True),
        ("rpo/_delta_log/00000000000000000003.checkpoint.parquet: checkpoint of version 3 is missing",),
        args=("sql", "SELECT * FROM rpo", "--lakehouse", "{dir}/lh"),
        code=12, names_file=False),
    Bad("build on a truncated Delta log (before Spark starts)", _lakehouse_with_bad_table,
        ("table rpo is not readable", "rpo/_delta_log/00000000000000000000.json: line 2", "Truncated"),
        args=("lakehouse", "build", "-c", "{path}"), code=10, names_file=False),
    Bad("build into a path under a file", _a_file_where_a_dir_goes, ("lakehouse.path", "not-a-dir"),
        args=("lakehouse", "build", "-c", "{path}"), names_file=False),
    Bad("build into a path root cannot create (/proc)", _lakehouse_at("/proc/mirrorlake-lakehouse"),
        ("lakehouse.path", "/proc/mirrorlake-lakehouse"), args=("lakehouse", "build", "-c", "{path}"),
        names_file=False),
    Bad("serve into a path under a file", _a_file_where_a_dir_goes, ("lakehouse.path", "not-a-dir"),
        args=("lakehouse", "serve", "-c", "{path}"), names_file=False),
    # -- issue 33, item 7: inputs that gave a traceback
    Bad("YAML nested 100,000 deep", "a: " + "[" * 100_000, ("nested too deeply",)),
    Bad("--as-of a unicode digit", "", ("--as-of '²'",), args=("sql", "SELECT 1", "--as-of", "²", "--lakehouse",
        "{dir}"), code=13, names_file=False),
    Bad("--at a unicode digit", A_B, ("--at '²'", "expected an ISO 8601 time"),
        args=("failover", "plan", "-c", "{path}", "--flow", "A->B", "--at", "²"), code=21, names_file=False),
    Bad("--status-port out of range", A_B, ("70000 is not in the range", "see 'mirrorlake replicate --help'"),
        args=("replicate", "{path}", "--status-port", "70000"), names_file=False),
    Bad("an unknown option, in the one-line form", A_B, ("No such option '--bogus'",),
        args=("replicate", "{path}", "--bogus"), names_file=False),
    Bad("--retention-hours nan", A_B, ("must be a number of hours", "nan"),
        args=("lakehouse", "maintain", "-c", "{path}", "--retention-hours", "nan"), code=14, names_file=False),
    # -- every subcommand: one wrong input each, answered before any cluster is asked
    Bad("clusters up: two brokers on overlapping ports", "clusters:\n  A: {bootstrap_servers: '127.0.0.1:29000'}\n"
        "  B: {bootstrap_servers: '127.0.0.1:29001'}\n", ("both need port 29001",),
        args=("clusters", "up", "-c", "{path}"), names_file=False),
    Bad("clusters status: no such config", "", ("configuration file not found",),
        args=("clusters", "status", "-c", "{dir}/none.yaml"), names_file=False),
    Bad("clusters down: not YAML", "clusters: [", ("not valid YAML",), args=("clusters", "down", "-c", "{path}")),
    Bad("translate: an unknown flow", A_B, ("unknown flow", "Q->B"),
        args=("translate", "-c", "{path}", "--flow", "Q->B", "--group", "g"), names_file=False),
    _stored_bad("a line not JSON", '{"topic": "t", "partition": 0, "offset": 5}\n{oops\n',
                "offsets.txt line 2: not JSON"),
    _stored_bad("Spark's -2 (earliest) names no record", '{"t": {"0": -2}}',
                "offsets.txt.t.0: offset -2 names no record"),
    _stored_bad("a CSV line of two fields", "t,0,5\nt,1\n",
                "offsets.txt line 2: expected topic,partition,offset (got 2 fields)"),
    _stored_bad("one partition at two offsets", "t,0,5\nt,0,7\n", "t[0] given twice (5 and 7)"),
    Bad("translate --offsets: no such file", _stored_offsets(""), ("cannot read offsets from", "none.txt"), code=20,
        names_file=False,
        args=("translate", "-c", "{path}", "--flow", "A->B", "--offsets", "{dir}/none.txt")),
    Bad("observe: an unknown flow", A_B, ("Q->B",), args=("observe", "{path}", "--flow", "Q->B"), names_file=False),
    Bad("import-mm2: an unknown flow", A_B, ("Q->B",), args=("import-mm2", "{path}", "--flow", "Q->B"),
        names_file=False),
    Bad("takeover-mm2: an unknown flow", A_B, ("Q->B",), args=("takeover-mm2", "{path}", "--flow", "Q->B"),
        names_file=False),
    Bad("dashboard: a port out of range", A_B, ("70000 is not in the range",),
        args=("dashboard", "-c", "{path}", "--port", "70000"), names_file=False),
    Bad("demo: no flow of the demo's topic", A_B, ("the demo needs an enabled flow",),
        args=("demo", "-c", "{path}"), names_file=False),
    Bad("failover apply: a time that is no time", A_B, ("--at 'soon'",),
        args=("failover", "apply", "-c", "{path}", "--flow", "A->B", "--at", "soon"), code=21, names_file=False),
    Bad("replicate: an empty --replicator-id", A_B, ("--replicator-id", "is empty"),
        args=("replicate", "{path}", "--replicator-id", " "), names_file=False),
    Bad("failback plan: an unknown flow", A_B, ("unknown flow", "Q->B"),
        args=("failback", "plan", "-c", "{path}", "--flow", "Q->B"), names_file=False),
    Bad("failback apply: no step named", A_B, ("name at least one step",),
        args=("failback", "apply", "-c", "{path}", "--flow", "A->B"), code=21, names_file=False),
    Bad("a lakehouse table without the columns the macros read", lambda p: _delta_table(p.parent / "lh"),
        ("is not a lakehouse of this mirrorlake",), args=("sql", "SELECT 1", "--lakehouse", "{dir}/lh"),
        code=12, names_file=False),
]  # fmt: skip


def run_in_process(monkeypatch, capsys, args: list[str]) -> tuple[int, str]:
    """``mirrorlake ARGS`` in this process: (exit code, stderr)."""
    monkeypatch.setattr(sys, "argv", ["mirrorlake", *args])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_named_error(case: Bad, tmp_path: Path, monkeypatch, capsys):
    path = tmp_path / case.name
    if callable(case.content):
        case.content(path)
    elif isinstance(case.content, bytes):
        path.write_bytes(case.content)
    else:
        path.write_text(case.content)
    monkeypatch.delenv("ML_UNSET_X", raising=False)
    monkeypatch.chdir(tmp_path)
    args = [a.format(path=path, dir=tmp_path) for a in case.args]
    code, err = run_in_process(monkeypatch, capsys, args)
    assert code == case.code, (code, err)
    assert err.startswith("error: "), err
    first = err.splitlines()[0]
    if case.names_file:
        assert str(path) in first, err
    for needle in case.needles:
        assert needle.format(path=path) in err, (needle, err)
    assert len(err) < 2000, err  # a message, not a dump


def test_the_table_has_at_least_thirty_rows():
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)
