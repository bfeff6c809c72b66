"""What must hold, judged by the model's truth (what the clusters hold), never by the core's figures.

- ``commit``: after every action, no committed source position passes a data record without a
  copy on the target (at least once: a crash replays, it never skips).
- ``lost``: once the world healed and every process stopped, every source data record is on the target.
- ``second copy``: and at most once, except by design, each case named: ``zombie`` (a process whose
  session expired while it was frozen keeps writing what it had sent until it learns it lost the
  partition: only exactly-once fences it). Each second copy outside those cases is a violation.
- ``mapping``: the offset mapping the state log holds translates every record copied once to
  that copy, exactly.
- ``stuck``: a healed world catches up and stops (``World.heal``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mirrorlake.simulation.logs import DATA, Copy
from replicator.client.mapping import TranslationMethod
from replicator.client.mapping_index import MappingIndex

if TYPE_CHECKING:
    from mirrorlake.simulation.world import World

__all__ = ["Violation", "check_commits", "check_end", "copies_by_record"]


@dataclass(frozen=True)
class Violation:
    kind: str
    text: str
    partition: int | None

    def __str__(self) -> str:
        where = f" [{self.partition}]" if self.partition is not None else ""
        return f"{self.kind}{where}: {self.text}"


def copies_by_record(world: World, partition: int) -> dict[int, list[Copy]]:
    out: dict[int, list[Copy]] = defaultdict(list)
    for copy in world.target.partitions[partition]:
        out[copy.upstream].append(copy)
    return out


def check_commits(world: World) -> list[Violation]:
    """No committed position past a data record that has no copy."""
    out = []
    for p, committed in sorted(world.group.committed.items()):
        copied = {c.upstream for c in world.target.partitions[p]}
        below = world.source.partitions[p][:committed]
        missing = [r.offset for r in below if r.kind == DATA and r.offset not in copied]
        if missing:
            out.append(Violation("commit", f"committed {committed} with {_span(missing)} never copied", p))
    return out


def check_end(world: World) -> list[Violation]:
    out: list[Violation] = []
    index = MappingIndex()
    index.add(world.state_topic.landed)
    flow = world.settings.flow
    for p in range(world.settings.partitions):
        copies = copies_by_record(world, p)
        data = [r.offset for r in world.source.partitions[p] if r.kind == DATA]
        lost = [u for u in data if not copies.get(u)]
        if lost:
            out.append(Violation("lost", f"{_span(lost)} never copied", p))
        twice = [u for u in data if len(copies.get(u, [])) > 1 and not _zombie(world, p, copies[u])]
        if twice:
            writers = sorted({c.writer for u in twice for c in copies[u]})
            out.append(Violation("second copy", f"{_span(twice)} copied more than once (by {writers})", p))
        wrong = []
        for u in data:
            found = copies.get(u, [])
            if len(found) != 1:
                continue
            t = index.translate(flow, world.source.topic, p, u)
            if t is None or t.method != TranslationMethod.EXACT or t.downstream != found[0].offset:
                wrong.append((u, found[0].offset, None if t is None else (t.downstream, t.method)))
        if wrong:
            out.append(Violation("mapping", f"{len(wrong)} records mistranslated, first {wrong[0]}", p))
    return out


def _zombie(world: World, partition: int, copies: list[Copy]) -> bool:
    """A second copy by design: one of them was produced by a writer that had not learnt yet that its
    session expired, and landed after the expiry."""
    for c in copies:
        for expired, learnt in world.lost_at.get((c.writer, partition), []):
            if expired is not None and c.landed_step > expired and (learnt is None or c.produced_step <= learnt):
                return True
    return False


def _span(offsets: list[int]) -> str:
    if len(offsets) == 1:
        return f"offset {offsets[0]}"
    return f"{len(offsets)} offsets ({offsets[0]}..{offsets[-1]})"
