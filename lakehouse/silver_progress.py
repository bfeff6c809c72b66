"""How far silver has consumed bronze: one record for the two engines that write silver.

Spark's silver (``lakehouse.silver``) is a Delta stream with a checkpoint of its own; delta-rs's
(``lakehouse.duck.silver``) reads bronze's rows added after a version. Both MERGE-or-skip by event
id (quarantine by state-topic coordinates), so a bronze row read twice lands once, and each records
here the bronze version up to which every row is in silver or quarantine. When delta-rs moved on,
Spark's checkpoint is behind: its next run starts a stream of its own right after the version
recorded (``startingVersion``), instead of reading again what delta-rs already decoded.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from ingest.paths import LakehousePaths
from ingest.storage import remove_tree
from lakehouse.state_file import load_state, save_state

__all__ = ["SilverProgress", "read_progress", "write_progress", "spark_checkpoint", "SPARK_CHECKPOINT"]

_log = logging.getLogger(__name__)

SPARK_CHECKPOINT = "silver"  # the stream checkpoint of lakehouses older than this record


@dataclass(frozen=True)
class SilverProgress:
    """Every bronze row up to ``bronze_version`` is in silver or quarantine. ``spark_checkpoint``: the
    Spark stream checkpoint that stands there (None: delta-rs moved on, Spark's is behind)."""

    bronze_version: int
    spark_checkpoint: str | None


def _file(paths: LakehousePaths) -> Path:
    return paths.checkpoint("silver-progress.json")


def read_progress(paths: LakehousePaths) -> SilverProgress | None:
    data = load_state(_file(paths))
    if data is None:
        return None
    checkpoint = data.get("spark_checkpoint")
    return SilverProgress(int(data["bronze_version"]), str(checkpoint) if checkpoint is not None else None)


def write_progress(paths: LakehousePaths, progress: SilverProgress) -> None:
    save_state(_file(paths), {"bronze_version": progress.bronze_version, "spark_checkpoint": progress.spark_checkpoint})


def spark_checkpoint(paths: LakehousePaths, progress: SilverProgress | None) -> tuple[str, int | None]:
    """(the checkpoint Spark's silver stream runs with, the bronze version it starts at: None to go on
    from the checkpoint). A checkpoint left behind by delta-rs is removed: it would read again."""
    if progress is None:
        return SPARK_CHECKPOINT, None
    if progress.spark_checkpoint is not None:
        return progress.spark_checkpoint, None
    start = progress.bronze_version + 1
    name = f"silver-from-{start}"
    for old in _stream_checkpoints(paths):
        if old.name != name:
            _remove(old)
    return name, start


def _stream_checkpoints(paths: LakehousePaths) -> list[Path]:
    root = paths.checkpoint("")
    if not root.exists():
        return []
    return [p for p in root.iterdir() if p.name == SPARK_CHECKPOINT or p.name.startswith("silver-from-")]


def _remove(path: Path) -> None:
    _log.info("silver: Spark's stream checkpoint %s is behind the silver tables: removed", path.name)
    remove_tree(path)
