"""The replicator is a library for replicator processes: it must import without pyspark."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def test_replicator_imports_and_builds_a_flow_without_pyspark():
    code = (
        "import sys; sys.modules['pyspark'] = None; sys.modules['delta'] = None\n"
        "import replicator, replicator.flow.runtime, replicator.flow.runner, replicator.events\n"
        "config = replicator.parse_config({'clusters': {'A': {'bootstrap_servers': 'x:1'}, "
        "'B': {'bootstrap_servers': 'y:1'}}, 'flows': [{'source': 'A', 'target': 'B'}]})\n"
        "print(replicator.Replicator(config).flows[0].name)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "A->B"


def test_public_surface_is_explicit():
    import replicator

    assert "Replicator" in replicator.__all__ and "translate" in replicator.__all__
    assert all(hasattr(replicator, name) for name in replicator.__all__)


# What a consumer application that fails over, or a Spark worker decoding events, may load.
_RUNTIME_PREFIXES = ("replicator.flow", "replicator.tasks", "replicator.metadata", "replicator.mm2")
_HEAVY = ("prometheus_client", "pyspark", "delta", "lakehouse", "ingest")


def test_client_core_loads_no_runtime_no_metrics_no_spark():
    code = (
        "import sys\n"
        "import replicator\n"
        "from replicator import translate, MappingIndex, translate_offsets, ReplicationPolicy\n"
        "import replicator.client.mapping, replicator.client.translation, replicator.client.state_reader\n"
        "import replicator.events\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    loaded = result.stdout.split()
    assert "replicator.client.translation" in loaded
    offending = [m for m in loaded if m.startswith(_RUNTIME_PREFIXES) or m.split(".")[0] in _HEAVY]
    assert offending == []


def test_lazy_surface_resolves_each_name_to_its_home():
    import replicator
    from replicator.client.mapping import translate
    from replicator.flow.runtime import Replicator

    assert replicator.translate is translate
    assert replicator.Replicator is Replicator
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = replicator.nope


def test_sql_readers_and_twins_load_no_spark():
    """DuckDB readers (sql, api, dashboard) and the DuckDB twins read each table's contract from its
    pyspark-free spec, never from the Spark module beside it."""
    code = (
        "import sys\nimport lakehouse.sql, lakehouse.catalog, lakehouse.duck.tables\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert [m for m in result.stdout.split() if m.split(".")[0] in ("pyspark", "delta")] == []


def test_every_engine_reads_the_one_spec_of_each_gold_table():
    """A gold table's contract is declared once (``lakehouse.tables.<name>.SPEC``): the Spark table,
    the DuckDB twin and the SQL catalogue hold that very object, in build order."""
    from lakehouse.catalog import GOLD_TABLE_NAMES
    from lakehouse.duck.tables import TWINS
    from lakehouse.gold_tables import GOLD_TABLES
    from lakehouse.tables import GOLD_SPECS

    assert [t.spec for t in GOLD_TABLES] == list(GOLD_SPECS)
    assert all(t.spec is s for t, s in zip(GOLD_TABLES, GOLD_SPECS, strict=True))
    assert all(TWINS[s.name].spec is s for s in GOLD_SPECS)
    assert tuple(s.name for s in GOLD_SPECS) == GOLD_TABLE_NAMES
    assert len(GOLD_TABLE_NAMES) == 9


def test_a_spec_refuses_no_row_id_and_a_table_listed_before_its_inputs():
    from lakehouse.tables import _check_order
    from lakehouse.tables.spec import GoldSpec

    with pytest.raises(ValueError, match="row_id"):
        GoldSpec(name="t", key=("flow",), row_id=(), sources=("checkpoint",))
    later = GoldSpec(name="b", key=("k",), row_id=("k",), sources=("x",), depends_on=("a",))
    with pytest.raises(ValueError, match="gold b is listed before"):
        _check_order((later, GoldSpec(name="a", key=("k",), row_id=("k",), sources=("x",))))


def test_every_error_exit_code_is_declared_once():
    import inspect

    import lakehouse.build
    import lakehouse.maintain
    import lakehouse.sql
    import replicator.errors
    from replicator.errors import ExitCode, MirrorlakeError

    errors = {
        cls
        for module in (replicator.errors, lakehouse.build, lakehouse.maintain, lakehouse.sql)
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, MirrorlakeError)
    }
    codes = [ExitCode(cls.exit_code) for cls in errors]  # ValueError if a code is not declared
    assert len(set(codes)) == len(codes), sorted(codes)


def test_the_dashboard_loads_no_spark():
    code = (
        "import sys\nimport dashboards.data, dashboards.timetravel, dashboards.view, dashboards.sidebar\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert [m for m in result.stdout.split() if m.split(".")[0] in ("pyspark", "delta")] == []


def test_no_code_reads_group_offsets_through_the_admin_api():
    """librdkafka's ListConsumerGroupOffsets segfaults on NOT_COORDINATOR (librdkafka#5040): a new
    cluster or a moving coordinator killed the replicator. Group offsets are read through a
    consumer (replicator.client.group_offsets); this keeps the crash-prone call out."""
    root = Path(__file__).resolve().parent.parent
    callers = [
        str(path.relative_to(root))
        for package in ("replicator", "mirrorlake", "lakehouse", "ingest", "dashboards", "examples", "bench")
        for path in (root / package).rglob("*.py")
        if "list_consumer_group_offsets(" in path.read_text()
    ]
    assert callers == []
