"""Every bench module imports, and the config a bench hands to ``mirrorlake replicate`` keeps its
client settings: benches run by hand, not in CI, so a broken import or a masked setting is found
only when someone needs the bench."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml

from bench.ml_processes import config_document
from replicator.config import parse_config

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.mark.parametrize("module", sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "__init__"))
def test_the_bench_module_imports(module: str) -> None:
    assert importlib.import_module(f"bench.{module}").__name__ == f"bench.{module}"


def test_a_written_bench_config_loads_back_with_its_client_settings() -> None:
    config = parse_config(
        {
            "clusters": {
                "S": {"bootstrap_servers": "127.0.0.1:1"},
                "T": {"bootstrap_servers": "127.0.0.1:3", "client": {"sasl.password": "pw-1", "linger.ms": 5}},
            },
            "flows": [{"source": "S", "target": "T", "audit": False}],
        },
        source="test",
    )
    text = yaml.safe_dump(config_document(config))
    assert "**" not in text
    loaded = parse_config(yaml.safe_load(text), source="test")
    assert loaded.cluster("T").client_config() == {
        "sasl.password": "pw-1",
        "linger.ms": "5",
        "bootstrap.servers": "127.0.0.1:3",
    }
    assert loaded.flows == config.flows
