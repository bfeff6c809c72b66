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


def test_sql_readers_load_no_spark():
    """DuckDB readers (sql, api, dashboard) name tables from the pyspark-free catalogue."""
    code = "import sys\nimport lakehouse.sql, lakehouse.catalog\nprint('\\n'.join(sorted(sys.modules)))\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert [m for m in result.stdout.split() if m.split(".")[0] in ("pyspark", "delta")] == []


def test_catalogue_names_every_gold_table_in_build_order():
    from lakehouse.catalog import GOLD_TABLE_NAMES
    from lakehouse.gold_tables import GOLD_TABLES

    assert tuple(spec.name for spec in GOLD_TABLES) == GOLD_TABLE_NAMES


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
