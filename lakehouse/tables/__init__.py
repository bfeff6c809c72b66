"""The gold tables, one package each: ``lakehouse.tables.<name>`` declares the table's contract
(``SPEC``, a ``GoldSpec``, and the constants both engines share) without importing an engine;
``<name>.spark`` builds it on Spark (``TABLE``), ``<name>.duck`` is its DuckDB twin (``TWIN``) for
incremental builds. A rule change touches one folder.

``GOLD_SPECS`` lists them in build order: a table comes after the gold tables it reads.
"""

from __future__ import annotations

from lakehouse.tables import (
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
from lakehouse.tables.spec import GoldSpec

__all__ = ["GOLD_SPECS", "GoldSpec"]

GOLD_SPECS: tuple[GoldSpec, ...] = (
    offset_mapping.SPEC,
    group_offsets.SPEC,
    rpo.SPEC,
    rpo_groups.SPEC,
    divergence.SPEC,
    heartbeat_latency.SPEC,
    topology.SPEC,
    failovers.SPEC,
    failbacks.SPEC,
)


def _check_order(specs: tuple[GoldSpec, ...]) -> None:
    built: set[str] = set()
    for spec in specs:
        if not set(spec.depends_on) <= built:
            raise ValueError(f"gold {spec.name} is listed before {sorted(set(spec.depends_on) - built)}")
        built.add(spec.name)


_check_order(GOLD_SPECS)
