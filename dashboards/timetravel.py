"""The dashboard's "as of" moments: the lakehouse's builds, found in the Delta logs (pure logic).

A build (``lakehouse build``, or one refresh of ``lakehouse serve``) commits silver tables, then
gold tables. Ordered by commit time, a build therefore ends with the last gold commit before the
next silver commit; that moment is the build's "as of": reading every table as of it
(``LakehouseSQL(as_of=moment)``: per table, the last version committed at or before it) shows
the lakehouse exactly as that build left it. Bronze commits (the ingest streams, every few
seconds under ``serve``) do not delimit builds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lakehouse.catalog import GOLD_TABLE_NAMES

__all__ = ["Build", "builds", "moment", "signature"]

_GOLD = frozenset(GOLD_TABLE_NAMES)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Build:
    number: int  # 1 for the first build still in the logs
    at_ms: int  # commit time of the build's last gold commit
    gold_versions: Mapping[str, int]  # gold table -> its version as of this build


def builds(history: Mapping[str, Sequence[tuple[int, int]]]) -> list[Build]:
    """Every build still in the Delta logs, oldest first, from ``Lakehouse.history()``."""
    commits = sorted(
        (ms, name in _GOLD, name, version)
        for name, versions in history.items()
        if name not in ("bronze_events", "quarantine")
        for version, ms in versions
    )
    out: list[Build] = []
    current: dict[str, int] = {}
    last_gold_ms: int | None = None
    for ms, is_gold, name, version in commits:
        if not is_gold and last_gold_ms is not None:  # a silver commit after gold: a new build began
            out.append(Build(len(out) + 1, last_gold_ms, dict(current)))
            last_gold_ms = None
        if is_gold:
            current[name] = version
            last_gold_ms = ms
    if last_gold_ms is not None:
        out.append(Build(len(out) + 1, last_gold_ms, dict(current)))
    return out


def moment(at_ms: int) -> datetime:
    """``at_ms`` as the datetime ``LakehouseSQL(as_of=...)`` maps back to exactly ``at_ms`` (no float loss)."""
    return _EPOCH + timedelta(milliseconds=at_ms, microseconds=500)


def signature(tables: Mapping[str, Path]) -> tuple[tuple[str, int], ...]:
    """Changes whenever any table gets a commit: each table's newest Delta log version (names only, cheap)."""
    out = []
    for name, path in sorted(tables.items()):
        versions = [int(p.stem) for p in (path / "_delta_log").glob("*.json") if p.stem.isdigit()]
        if versions:
            out.append((name, max(versions)))
    return tuple(out)
