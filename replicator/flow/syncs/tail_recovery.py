"""Recovery of the copies a killed process left without an offset sync, on real clusters.

The decisions are ``replicator.flow.core.takeover``'s (and ``core.matching``'s): which target
records are copies of which source records, which syncs prove them, where a partition resumes. This
module reads the clusters for them (``kafka_logs.KafkaLogs``), logs what they found and publishes
the syncs durably:

- ``recover_orphan_copies``: a partition handed to a process, before its first copy (``takeover``).
- ``TailRecovery.run``: the orphans of given partitions (failover and failback read them too).
- ``TailRecovery.new_life``: a re-created topic's copies made before the flow noticed it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Producer

from replicator.client.group_offsets import committed_offsets
from replicator.client.mapping_index import MappingIndex
from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.errors import ReplicationError
from replicator.events import OffsetSync
from replicator.flow.core.logs import Headers
from replicator.flow.core.offset_sync import SyncOrigin
from replicator.flow.core.takeover import Recovered, StateReader, Verdicts, match_tail, orphan_syncs, plan_takeover
from replicator.flow.syncs.kafka_logs import kafka_logs
from replicator.kafka.settings import consumer_group_id
from replicator.kafka.state_log import StateLog

__all__ = ["TailRecovery", "Recovered", "Recovery", "recover_orphan_copies", "publish_syncs"]

_log = logging.getLogger(__name__)


class TailRecovery:
    """Finds the orphan copies of a flow's partitions and returns the syncs that cover them."""

    def __init__(
        self,
        origin: SyncOrigin,
        source_conf: dict[str, object],
        target_conf: dict[str, object],
        *,
        max_tail: int = 1_000_000,
    ) -> None:
        self._origin = origin
        self._source_conf = dict(source_conf)
        self._target_conf = dict(target_conf)
        self._max_tail = max_tail

    def run(
        self, index: MappingIndex, partitions: list[tuple[str, str, int]], committed: dict[tuple[str, int], int]
    ) -> tuple[list[OffsetSync], list[Recovered]]:
        """Syncs for every orphan copy in ``partitions`` (source topic, target topic, partition).

        A partition with a mapping is searched past its last known copy ``(U, D)``; one without
        (killed before its first durable sync) from the target's log start, against the source
        from the flow's ``committed`` position (else the source's log start). The syncs carry the
        ids the two topics have on the clusters, the life they are copies of; a topic whose id
        changes while it is read gives none (``core.takeover.orphan_syncs``).
        """
        flow = self._origin.flow
        with (
            kafka_logs(self._source_conf, f"{flow}-recovery") as source,
            kafka_logs(self._target_conf, f"{flow}-recovery") as target,
        ):
            return orphan_syncs(self._origin, source, target, index, partitions, committed, max_tail=self._max_tail)

    def new_life(
        self, partitions: list[tuple[str, str, int, int]], topic_id: str | None, remote_topic_id: str | None = None
    ) -> tuple[list[OffsetSync], dict[tuple[str, int], int]]:
        """The copies of a re-created topic's records the flow made before it noticed the new topic.

        Between the topic's re-creation and the check that notices it, the flow's consumer may copy
        records of the new topic (reset to its log start when the old position is out of range, or
        on from the old position when the new topic is already longer) under the old topic's id.
        ``partitions``: (source topic, target topic, partition, ``d_from``), ``d_from`` the target
        offset from which copies are in doubt (the end of the copies made before the last check
        that saw the old id). The target from there is matched by content against the new topic
        from its log start. A re-created *remote* topic is matched the same way from its offset 0
        (``d_from`` 0): what it holds of the source from its log start was recopied. Returns the
        syncs of the matches, stamped ``topic_id`` and ``remote_topic_id`` (the new life of the
        mapping), and per partition the first source offset none of them covers: copying goes
        on there, so a record copied before the flow noticed is not copied again unless a record
        before it was never copied (then from that record: nothing lost, some copied twice)."""
        syncs: list[OffsetSync] = []
        resume: dict[tuple[str, int], int] = {}
        since = {(s, t, p): d for s, t, p, d in partitions}
        if not since:
            return syncs, resume
        flow = self._origin.flow
        with (
            kafka_logs(self._source_conf, f"{flow}-recovery") as source,
            kafka_logs(self._target_conf, f"{flow}-recovery") as target,
        ):
            t_bounds = target.bounds([(t, p) for _s, t, p in since])
            s_bounds = source.bounds([(s, p) for s, _t, p in since])
            for (topic, target_topic, partition), d_since in since.items():
                if (target_topic, partition) not in t_bounds or (topic, partition) not in s_bounds:
                    continue
                (t_low, t_end), (s_low, s_end) = t_bounds[(target_topic, partition)], s_bounds[(topic, partition)]
                d_from = max(t_low, d_since, t_end - self._max_tail)
                m = match_tail(
                    self._origin, source, target, (topic, target_topic, partition), (d_from, t_end),
                    (s_low, s_low, s_end), None, (topic_id, remote_topic_id),
                )  # fmt: skip
                syncs += m.syncs
                matched = {u for u, _d in m.pairs}
                # copying goes on at the first source record read with no copy found
                resume[(topic, partition)] = next(
                    (o for o in m.read if o not in matched), m.read[-1] + 1 if m.read else s_low
                )
                if m.tail:
                    _log.info(
                        "flow %s: %s[%d]: %d of %d target records from offset %d are copies of the new topic's "
                        "records; its copying goes on at %d",
                        flow, topic, partition, len(m.pairs), m.tail, d_from, resume[(topic, partition)],
                    )  # fmt: skip
        return syncs, resume


@dataclass(frozen=True)
class Recovery:
    """What a flow's takeover found: how many ``syncs`` it published for orphan copies, and
    ``resume_at``: per source partition, where copying resumes when that is past its commit
    (``replicator.flow.core.resume``)."""

    syncs: int = 0
    resume_at: dict[tuple[str, int], int] = field(default_factory=dict)


def recover_orphan_copies(
    config: MirrorlakeConfig,
    flow: FlowConfig,
    replicator_id: str,
    producer: Producer,
    partitions: list[tuple[str, str, int]],
    view: StateReader,
    skipped: Callable[[Headers], bool] = lambda _h: False,
    previous: Verdicts | None = None,
) -> Recovery:
    """Publish, durably, the syncs of the copies a killed process left without one; and say where
    each partition resumes so that no copy the flow knows is made twice (``core.takeover``).

    Call before the flow copies anything (its new copies would otherwise be taken for orphans'
    neighbours). ``partitions``: (source topic, target topic, partition) of the flow's selection;
    ``producer`` writes to the target's state topic outside any transaction. ``view``: the flow's
    state view, read on to the log's end here (``previous`` judges on that same reading), not closed
    here. ``skipped``: the records the flow never copies (by their headers: a replication cycle's).
    ``previous``: how the runs before ended (``PreviousRun``; None: each partition resumes past its
    known copies).
    """
    if not partitions:
        return Recovery()
    started = time.monotonic()
    origin = SyncOrigin(flow.name, replicator_id, flow.source, flow.target)
    source_conf = config.cluster(flow.source).client_config()
    offsets = committed_offsets(source_conf, consumer_group_id(flow), {source for source, _t, _p in partitions})
    committed = {(o.topic, o.partition): o.offset for o in offsets}
    with (
        kafka_logs(source_conf, f"{flow.name}-recovery") as source,
        kafka_logs(config.cluster(flow.target).client_config(), f"{flow.name}-recovery") as target,
    ):
        plan = plan_takeover(origin, source, target, view, partitions, committed, previous=previous, skipped=skipped)
    for r in plan.report:
        _log.info(
            "flow %s: %s[%d]: %d target records past the last offset sync, %d recovered as copies",
            flow.name, r.source_topic, r.partition, r.tail, r.matched,
        )  # fmt: skip
    _log.info(
        "flow %s: orphan copies searched in %d partitions in %.1f s: %d syncs to publish",
        flow.name, len(partitions), time.monotonic() - started, len(plan.syncs),
    )  # fmt: skip
    if plan.clean:
        _log.info(
            "flow %s: %s: their last copier stopped cleanly: copying resumes at the committed positions",
            flow.name, ", ".join(f"{s}[{p}]" for s, p in plan.clean),
        )  # fmt: skip
    if plan.syncs:
        publish_syncs(config, flow, producer, plan.syncs)
    return Recovery(len(plan.syncs), plan.resume_at)


def publish_syncs(config: MirrorlakeConfig, flow: FlowConfig, producer: Producer, syncs: list[OffsetSync]) -> None:
    """Emit ``syncs`` to the state topic and wait for them all to be acknowledged (or raise)."""
    state = StateLog(producer, config.state_topic)
    for sync in syncs:
        while True:
            try:
                state.emit(sync)
                break
            except BufferError:
                producer.poll(0.05)
    if not state.flushed():
        raise ReplicationError(f"flow {flow.name}: recovered offset syncs not acknowledged by {flow.target}")
