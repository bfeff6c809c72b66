"""Every gold table, in build order (a table comes after the gold tables it reads)."""

from __future__ import annotations

from lakehouse import (
    divergence,
    failbacks,
    failovers,
    group_offsets,
    heartbeat_latency,
    offset_mapping,
    rpo,
    rpo_groups,
    topology,
)
from lakehouse.gold import GoldTable

__all__ = ["GOLD_TABLES"]

GOLD_TABLES: tuple[GoldTable, ...] = (
    offset_mapping.TABLE,
    group_offsets.TABLE,
    rpo.TABLE,
    rpo_groups.TABLE,
    divergence.TABLE,
    heartbeat_latency.TABLE,
    topology.TABLE,
    failovers.TABLE,
    failbacks.TABLE,
)


_built: set[str] = set()
for _spec in GOLD_TABLES:
    assert set(_spec.depends_on) <= _built, f"{_spec.name} is listed before {_spec.depends_on}"
    _built.add(_spec.name)
