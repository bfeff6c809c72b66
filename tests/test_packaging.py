"""The replicator is a library for replicator processes: it must import without pyspark."""

from __future__ import annotations

import subprocess
import sys


def test_replicator_imports_and_builds_a_flow_without_pyspark():
    code = (
        "import sys; sys.modules['pyspark'] = None; sys.modules['delta'] = None\n"
        "import replicator, replicator.runtime, replicator.flow, replicator.events\n"
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
