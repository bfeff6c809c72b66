"""What a consumer that fails over re-reads and loses, from the records on both sides (ground truth).

``FailoverCosts`` holds every copy ``(upstream u, downstream d)`` of one partition, matched by
content (``mirrorlake.groundtruth.copies_by_content``). Resuming at target offset ``t`` after committing
``c`` on the source re-reads the copies at or after ``t`` of source records before ``c``, and loses
the replicated source records at or after ``c`` with no copy at or after ``t`` (the brief's
definitions). ``format_report`` prints one row per group and partition and the summary lines.
"""

from __future__ import annotations

from dataclasses import dataclass

from mirrorlake.groundtruth import GroundTruth, copies_by_content, read_partition

__all__ = ["Cost", "FailoverCosts", "GroupRow", "Comparison", "format_report", "read_partition", "copies_by_content"]


@dataclass(frozen=True)
class Cost:
    lost: int
    reread: int


class FailoverCosts:
    """Failover cost of resuming at target offset ``t`` after committing ``c``, from every copy (u, d)."""

    def __init__(self, copies: list[tuple[int, int]]) -> None:
        self.truth = GroundTruth(copies)
        self._copies = copies

    def cost(self, c: int, t: int) -> Cost:
        lost = sum(1 for u, d in self.truth.latest.items() if u >= c and d < t)
        reread = sum(1 for u, d in self._copies if u < c and d >= t)
        return Cost(lost, reread)

    def exact(self, c: int) -> int | None:
        """The brief's exact translation (``mirrorlake.groundtruth.GroundTruth.translate``)."""
        return self.truth.translate(c)


@dataclass(frozen=True)
class GroupRow:
    group: str
    partition: int
    committed: int
    exact: int | None  # on B
    mirrorlake: int | None
    mirrorlake_cost: Cost
    mirrorlake_checkpoint: int | None  # the latest Checkpoint event, if the replicator emitted one
    mirrorlake_checkpoint_cost: Cost | None
    mm2: int | None  # None: MM2 wrote no checkpoint (the consumer starts at the log start)
    mm2_cost: Cost


@dataclass(frozen=True)
class Comparison:
    topic: str
    records: int
    rows: tuple[GroupRow, ...]
    foreign_on_b: int  # target records that are no copy of a committed source record
    foreign_on_c: int
    mm2_bad_checkpoints: int


def _fmt(value: int | None) -> str:
    return "-" if value is None else str(value)


def format_report(comparison: Comparison) -> list[str]:
    header = (
        f"{'group':<20} {'p':>2} {'committed':>9} {'exact B':>7} | {'ml':>7} {'lost':>5} {'reread':>6} "
        f"{'ml ckpt':>7} {'reread':>6} | {'mm2':>7} {'lost':>5} {'reread':>6}"
    )
    lines = [header, "-" * len(header)]
    for r in comparison.rows:
        ckpt_reread = r.mirrorlake_checkpoint_cost.reread if r.mirrorlake_checkpoint_cost else None
        lines.append(
            f"{r.group:<20} {r.partition:>2} {r.committed:>9} {_fmt(r.exact):>7} | {_fmt(r.mirrorlake):>7} "
            f"{r.mirrorlake_cost.lost:>5} {r.mirrorlake_cost.reread:>6} {_fmt(r.mirrorlake_checkpoint):>7} "
            f"{_fmt(ckpt_reread):>6} | {_fmt(r.mm2):>7} {r.mm2_cost.lost:>5} {r.mm2_cost.reread:>6}"
        )
    rows = comparison.rows
    ckpts = [r.mirrorlake_checkpoint_cost for r in rows if r.mirrorlake_checkpoint_cost is not None]
    lines += [
        "",
        f"group partitions: {len(rows)}; MM2 checkpoints missing for {sum(r.mm2 is None for r in rows)}; "
        f"mirrorlake checkpoint events for {len(ckpts)}",
        f"target records that copy no committed source record (aborted transactions): "
        f"B (mirrorlake) {comparison.foreign_on_b}, C (MM2) {comparison.foreign_on_c}",
        f"lost_records_mirrorlake={sum(r.mirrorlake_cost.lost for r in rows)}",
        f"lost_records_mm2={sum(r.mm2_cost.lost for r in rows)}",
    ]
    if ckpts:
        lines.append(f"reread_records_mirrorlake_checkpoints={sum(c.reread for c in ckpts)}")
    lines += [
        f"reread_records_mirrorlake={sum(r.mirrorlake_cost.reread for r in rows)}",
        f"reread_records_mm2={sum(r.mm2_cost.reread for r in rows)}",
    ]
    return lines
