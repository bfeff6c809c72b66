"""A Spark Structured Streaming query's Kafka positions, moved to the flow's target in its checkpoint.

A streaming query keeps its source positions in its checkpoint directory, not in a consumer group,
so moving groups leaves it behind. Spark's layout: ``offsets/<batch>`` holds the log version
(``v1``), the batch's metadata (JSON), then one line per source (the Kafka source's is
``{"topic": {"partition": offset}}``, the next offsets to read when the batch ends); ``commits/<batch>``
says the batch is done. On restart Spark goes on after the newest batch that has both.

``rewrite_checkpoint(config, flow, path)``: the Kafka source positions of the newest batch ``N``
(committed) are translated exactly (``translate_positions``: the failover plan's rules, from the
target alone) under the remote topic names, and ``offsets/N`` is rewritten with them in place; its
original is kept beside it as ``.N.before-failover`` (Spark reads only files named by a number;
moving it back undoes the rewrite). In place, not as a new batch: a file sink's metadata log and a
stateful query's state store are kept per batch id, and a batch id no sink or state ever saw would
break both. Spark then starts batch ``N+1`` at the translated positions; restart the query against
the target (``kafka.bootstrap.servers``), subscribed to the remote topics.

Refused, with the reason: no committed batch; a newer batch not committed (a query running, or one
stopped mid-batch: ``force`` sets those entries aside as ``.K.before-failover`` too, so Spark does
not replay a batch ending at source positions); a checkpoint rewritten already; a source line
naming a topic the flow did not copy; a partition with no target position (nothing of it copied).
Local paths only (Spark's ``file:`` checkpoints).
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from replicator.config import MirrorlakeConfig
from replicator.errors import FailoverError
from replicator.failover.api import translate_positions
from replicator.failover.plan import GroupPartitionPlan
from replicator.failover.stored_positions import StoredPosition, parse_positions

__all__ = ["CheckpointRewrite", "rewrite_checkpoint"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckpointRewrite:
    """What ``rewrite_checkpoint`` found and wrote (``written`` False: a dry run)."""

    checkpoint: Path
    batch: int  # the batch whose offsets were translated
    rows: tuple[GroupPartitionPlan, ...]
    offsets_text: str
    set_aside: tuple[int, ...]  # newer uncommitted batches set aside (``force``)
    written: bool


def _batches(directory: Path) -> dict[int, Path]:
    """Batch id -> file of ``offsets/`` or ``commits/`` (Spark's temporary and checksum files left out)."""
    if not directory.is_dir():
        return {}
    return {int(p.name): p for p in directory.iterdir() if p.name.isdigit() and p.is_file()}


def _kafka_positions(line: str, where: str) -> list[StoredPosition] | None:
    """The positions of a source line when it is a Kafka source's (``{topic: {partition: offset}}``)."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict) or not value or not all(isinstance(v, dict) for v in value.values()):
        return None
    return parse_positions(line, where)


def rewrite_checkpoint(
    config: MirrorlakeConfig,
    flow: str,
    checkpoint: Path,
    *,
    dry_run: bool = False,
    force: bool = False,
) -> CheckpointRewrite:
    """Translate the checkpoint's newest committed Kafka positions to ``flow``'s target, in place (module doc)."""
    offsets, commits = _batches(checkpoint / "offsets"), _batches(checkpoint / "commits")
    done = sorted(set(offsets) & set(commits))
    if not done:
        raise FailoverError(f"{checkpoint}: no committed batch (offsets/N with commits/N): not a query's checkpoint")
    batch = done[-1]
    if _kept(offsets[batch]).exists():
        raise FailoverError(f"{offsets[batch]} was rewritten already (the original is {_kept(offsets[batch]).name})")
    newer = sorted(n for n in offsets if n > batch)
    if newer and not force:
        age = time.time() - offsets[newer[-1]].stat().st_mtime
        raise FailoverError(
            f"{checkpoint}: batch {newer[-1]} is not committed (offsets/{newer[-1]} written {age:.0f} s ago): stop "
            "the query first; if it is stopped, --force sets that batch aside"
        )
    lines = offsets[batch].read_text().splitlines()
    if len(lines) < 3 or not lines[0].startswith("v"):
        raise FailoverError(f"{offsets[batch]}: not a Spark offsets log entry (version, metadata, source lines)")
    sources = [_kafka_positions(line, f"{offsets[batch]} source {i}") for i, line in enumerate(lines[2:])]
    positions = [p for found in sources if found for p in found]
    if not positions:
        raise FailoverError(f"{offsets[batch]}: no Kafka source among its {len(sources)} source line(s)")
    rows = translate_positions(config, flow, positions).partitions
    at = {(r.source_topic, r.partition): r for r in rows}
    missing = [f"{r.source_topic}[{r.partition}]" for r in rows if r.target_offset is None]
    if missing:
        raise FailoverError(f"no position on the target for {', '.join(missing)} (nothing of them copied)")
    out = [*lines[:2]]
    for line, found in zip(lines[2:], sources, strict=True):
        if not found:
            out.append(line)  # another kind of source: left as it is
            continue
        moved: dict[str, dict[str, int]] = {}
        for p in found:
            row = at[(p.topic, p.partition)]
            moved.setdefault(row.target_topic, {})[str(p.partition)] = int(row.target_offset or 0)
        out.append(json.dumps(moved, separators=(",", ":")))
    text = "\n".join(out)
    if not dry_run:
        for n in newer:
            _set_aside(offsets[n])
        _replace_keeping(offsets[batch], text)
        _log.info("%s: offsets/%d rewritten with %s's positions on the target", checkpoint, batch, flow)
    return CheckpointRewrite(checkpoint, batch, rows, text, tuple(newer), not dry_run)


def _kept(path: Path) -> Path:
    return path.with_name(f".{path.name}.before-failover")


def _set_aside(path: Path) -> None:
    """Rename ``path`` to its kept name; drop its checksum (Hadoop's ``.N.crc``), which would not match."""
    path.rename(_kept(path))
    path.with_name(f".{path.name}.crc").unlink(missing_ok=True)


def _replace_keeping(path: Path, text: str) -> None:
    """Put ``text`` at ``path``, the original kept beside it; at every instant ``path`` is whole or the
    original is at its kept name."""
    temp = path.with_name(f".{path.name}.mirrorlake.tmp")
    temp.write_text(text)
    os.link(path, _kept(path))
    path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
    os.replace(temp, path)
