"""One flow ``source->target``: copy records, publish offset syncs, keep positions safe.

Fidelity: key, value, headers, timestamp and partition number are copied unchanged (plus the
provenance header where enabled); the remote topic has at least the source's partition count.
Source partitions are shared among the processes of one flow by the consumer group
``mirrorlake.<source>-><target>`` with cooperative-sticky assignment; a revoked partition is
drained and its position committed before it is given up, and a partition handed over while the
process runs is copied only once its last owner's copies are recovered (``core.takeover``).

Delivery: ``AtLeastOnceCommits`` by default, ``TransactionalCommits`` with ``exactly_once``
(``replicator.flow.syncs.commits`` states both contracts).

The decisions (which partitions are held, recovered, resumed where, whether a stop is clean) are
``replicator.flow.core``'s; this runner performs them with real clients. It wires pieces that each
have one job: its clients come from a factory it is given
(``replicator.flow.clients``), the copy hot path is ``NativeCopier`` (the compiled produce path,
``copy_engine`` auto or native) or ``PythonCopier`` (pure Python; exactly-once), topic following is
``TopicFollower``, the stop condition of a batch run is ``CaughtUpCheck``, and the offset syncs
and commit gating are ``SyncLedger`` and ``Commits``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Protocol, TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from replicator.access.permissions import AUTHORIZATION_CODES
from replicator.client.mapping_index import MappingIndex
from replicator.client.policy import ReplicationPolicy, policy_from_config
from replicator.client.provenance import Provenance
from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.config.topology import provenance_enabled
from replicator.errors import MirrorlakeError, ReplicationError
from replicator.events import Event, Lifecycle, MetadataChange, OffsetSync
from replicator.flow.clients import ClientFactory, FlowClients, kafka_clients
from replicator.flow.control.caught_up import CaughtUpCheck
from replicator.flow.control.outage import ADMIN_ERRORS, Side
from replicator.flow.control.rejoin import RejoinWatchdog
from replicator.flow.control.shutdown import StopBudget, StopTimedOut
from replicator.flow.control.stall import REJOIN, RESUME, StallWatch
from replicator.flow.control.stop_requests import StopRequestWatcher
from replicator.flow.copying import Copier
from replicator.flow.copying.backpressure import Backpressure
from replicator.flow.copying.batching import BATCH_MAX, Batcher
from replicator.flow.copying.copier import PythonCopier
from replicator.flow.copying.native_copier import NativeCopier
from replicator.flow.core.offset_sync import SyncOrigin
from replicator.flow.core.ownership import Ownership
from replicator.flow.core.resume import LEFT_COPIES
from replicator.flow.core.sync_ledger import TP, SyncLedger
from replicator.flow.rebalance import Rebalance
from replicator.flow.syncs.commits import AbortTransaction, AtLeastOnceCommits, Commits, TransactionalCommits
from replicator.flow.syncs.deliveries import Deliveries
from replicator.flow.syncs.gap_recovery import GapRecovery
from replicator.flow.syncs.previous_runs import SharedPreviousRun
from replicator.flow.syncs.tail_recovery import Recovery, recover_orphan_copies
from replicator.flow.topics.lives_keeper import LivesKeeper
from replicator.flow.topics.metadata_sync import TopicMetadataSync
from replicator.flow.topics.topic_follower import TopicFollower
from replicator.kafka.settings import QUEUE_MAX_MESSAGES, consumer_group_id
from replicator.kafka.state_log import StateLog
from replicator.metadata.topics import RemoteTopic, flow_topic_selector
from replicator.metrics.connect_metrics import mm2_connectors
from replicator.metrics.stats import FlowStats
from replicator.tasks.base import StateTasks, StateView
from replicator.tasks.flow_tasks import flow_state_tasks
from replicator.tasks.read_positions import ReadPositions

__all__ = ["FlowRunner", "FlowStats", "consumer_group_id"]


class _StopFlag(Protocol):
    def is_set(self) -> bool: ...


class _Either:
    """Set when either event is: the process's stop or this flow's own stop request."""

    def __init__(self, a: threading.Event, b: threading.Event) -> None:
        self._a, self._b = a, b

    def is_set(self) -> bool:
        return self._a.is_set() or self._b.is_set()


_log = logging.getLogger(__name__)

# three session timeouts (settings: 10 s) after a loss with no assignment: join the group anew
_REJOIN_AFTER_S = 30.0
_T = TypeVar("_T")
_TASKS_JOIN_S = 5.0  # a stop that gave up on the target waits this long for a state task in progress
_LEAVE_S = 5.0  # at most this long serving the last rebalance before close() (``_leave_group``)
_FINAL_ROUND_MIN_S = 10.0  # the state tasks' last round after a stop, even when the drain spent the budget
_PAUSED_WAIT_S = 0.1  # while reading is paused, the loop waits on deliveries this long per turn

TaskFactory = Callable[..., StateTasks]


class FlowRunner:
    """Runs one flow on the calling thread until ``stop`` is set (or, optionally, caught up).

    ``clients`` makes the flow's Kafka clients (default: real ones, ``kafka_clients``);
    ``state_tasks`` makes the tasks that run beside the copy loop (default: ``flow_state_tasks``).
    """

    def __init__(
        self,
        config: MirrorlakeConfig,
        flow: FlowConfig,
        *,
        replicator_id: str,
        policy: ReplicationPolicy | None = None,
        clients: ClientFactory = kafka_clients,
        state_tasks: TaskFactory = flow_state_tasks,
    ) -> None:
        self.config = config
        self.flow = flow
        self.replicator_id = replicator_id
        self.policy = policy or policy_from_config(config.replication_policy)
        self.stats = FlowStats(source=flow.source, target=flow.target, metric_names_formats=flow.metric_names_formats)
        self._selector = flow_topic_selector(config, flow, self.policy)
        self._provenance = Provenance(flow.source, flow.target, enabled=provenance_enabled(config, self.policy))
        self._client_factory = clients
        self._task_factory = state_tasks
        self._own = Ownership(exactly_once=flow.exactly_once)  # held, assigned, starts to commit, clean stop
        # how the runs before this one ended, for its first recovery (None: every partition resumes
        # past its known copies; a clean stop speaks for the commits of the first assignment only)
        self._previous: SharedPreviousRun | None = None
        self._takeover_view: StateView | None = None  # the loop's own view of the state log, for them
        self._decided_topics: set[str] = set()  # source topics whose latest topic metadata_change decided a deletion
        self._created_topics: dict[str, str] = {}  # source -> remote topics the flow's events say it created
        self._rejoin = RejoinWatchdog(_REJOIN_AFTER_S)
        self._stall = StallWatch(self.flow.stall_seconds)
        self._tasks: StateTasks | None = None
        self._clients: FlowClients | None = None
        self.read_positions = ReadPositions()  # for the watermark task (exact RPO)
        self._stop_flag: _StopFlag | None = None
        self._stop_budget = StopBudget(
            config.stop_timeout_seconds, lambda: self._stop_flag is not None and self._stop_flag.is_set()
        )

    @property
    def leads_state_tasks(self) -> bool:
        """Whether this process runs the flow's state tasks now (one process per flow does)."""
        return self._tasks is not None and self._tasks.leading

    @property
    def _remote(self) -> dict[str, RemoteTopic]:
        return self._follower.remote

    # -- wiring ------------------------------------------------------------------------------
    def _wire(self) -> None:
        """Make the clients (through the factory) and the pieces that use them."""
        clients = self._client_factory(self.config, self.flow, replicator_id=self.replicator_id)
        self._clients = clients
        self._consumer, self._producer = clients.consumer, clients.producer
        self._outages = clients.outages
        # the data producer: the compiled copier's own, or the Python producer that also writes the syncs
        self._copier: Copier
        self._data: Producer | NativeCopier
        if clients.copy_settings is not None:
            _log.info("flow %s: records are produced on the compiled path (copy_engine %s)", self.flow.name,
                      self.flow.copy_engine)  # fmt: skip
            self.stats.copy_path = "compiled"
            self._copier = self._data = NativeCopier(
                self.flow.name, self.stats, self._provenance, clients.copy_settings,
                self._outages.client_error_callback("target"), track_every=self.flow.offset_lag_max,
            )  # fmt: skip
        else:
            self.stats.copy_path = "python"
            self._copier = PythonCopier(
                self.flow.name, self.stats, self._provenance, track_every=self.flow.offset_lag_max
            )
            self._data = self._producer
        # the syncs' and lifecycle events' producer where it is not the data producer: polled, flushed
        # and purged beside it
        beside: tuple[Producer, ...] = () if self._data is self._producer else (self._producer,)
        self._backpressure = Backpressure(
            self.flow.name, self._consumer, self._data, self._outages,
            lambda: self.stats.records - self._copier.in_flight, lambda: self._copier.in_flight,
            high=QUEUE_MAX_MESSAGES // 2, low=QUEUE_MAX_MESSAGES // 4,
        )  # fmt: skip
        state = StateLog(self._producer, self.config.state_topic)
        origin = SyncOrigin(self.flow.name, self.replicator_id, self.flow.source, self.flow.target)
        topic_ids: dict[str, str] = {}  # the source topics' ids every sync carries (flow.topic_lives)
        remote_ids: dict[str, str] = {}  # and their remote topics' ids (flow.remote_lives)
        self.ledger = SyncLedger(origin, self.flow.offset_lag_max, state, self._producer.poll, topic_ids, remote_ids)
        self._deliveries = Deliveries(
            self.flow, self._copier, self._data, beside, self.ledger, state, self.stats, self._stop_budget,
            self._watch_outages, lambda err: self._lives.remote_topic_gone(err), lambda: self._outages.fatal,
        )  # fmt: skip
        self._drain = self._deliveries.drain
        self._lives = LivesKeeper(
            self.config, self.flow, self.replicator_id, self.stats,
            mapping=lambda: self._tasks.ctx.view.index if self._tasks is not None else None,
            remote=lambda: self._remote, own=self._own, ledger=self.ledger, forget=self._forget_copies,
            drain=self._drain, commit_starts=lambda: self._rebalance.commit_due(None), emit_durably=self._emit_durably,
            matched_producer=lambda: self._clients.lifecycle_producer if self._clients is not None else None,
            topic_ids=topic_ids, remote_ids=remote_ids,
        )  # fmt: skip
        self.commits: Commits
        if clients.positions is not None:
            self.commits = TransactionalCommits(
                self._consumer,
                self._producer,
                clients.positions,
                self.ledger,
                self._drain,
                self.flow.name,
                self.flow.transaction_interval_seconds,
                self._outages,
                self._stop_budget,
            )
        else:
            self.commits = AtLeastOnceCommits(
                self._consumer, self.ledger, self._drain, self.flow.name, lambda: self._own.assigned
            )
        self._follower = TopicFollower(
            self.flow.name,
            self._selector,
            clients.topics,
            self._subscribe,
            lambda topic: self._data.list_topics(topic, timeout=10),  # the producer sees new partitions
            lambda made: self._metadata_sync.created(made),
        )
        self._rebalance = Rebalance(
            self.flow, self._consumer, self._own, self.commits, self._lives, self._rejoin, self._outages, self.stats,
            recover=self._recover, remote=lambda: {t: r.target_topic for t, r in self._remote.items()},
            forget=self._forget,
        )  # fmt: skip
        self._copier.connect(
            self._producer,
            self.ledger,
            self._follower.remote_for,
            self._consumer_error,
            self.commits.consumed if self.flow.exactly_once else None,
        )
        self.stats.offset_commit_ms = self.commits.commit_ms
        self.stats.in_flight = lambda: self._copier.in_flight
        self.stats.leading = lambda: self.leads_state_tasks
        self.stats.waiting = lambda: self._outages.waiting
        self._metadata_sync = TopicMetadataSync(
            self.flow, clients, self._follower.target_topics, self._outages, self._emit_event, self.replicator_id
        )
        self._caught_up = CaughtUpCheck(self._consumer, self.commits, self.ledger, clients.topics.source_end_offsets)

    # -- the loop ----------------------------------------------------------------------------
    def run(self, stop: threading.Event, *, until_caught_up: bool = False) -> FlowStats:
        """Replicate until ``stop`` is set; with ``until_caught_up``, also stop once lag is zero."""
        self._wire()
        try:
            return self._run_wired(stop, until_caught_up)
        finally:  # also when the flow fails before its loop (a refused state topic, say)
            # A clean stop committed already (commits.close/give_up); a failed flow must not commit
            # from a half-known state. And librdkafka 2.16 aborted the process (SIGABRT, CI of
            # 2026-11-28) in a synchronous commit inside close()'s revoke after a source topic was
            # re-created: close() revokes without committing.
            self._own.closing = True
            self._leave_group()
            self._consumer.close()
            self._copier.close()

    def _leave_group(self) -> None:
        """Unsubscribe and serve the resulting rebalance callbacks here, before ``close()``.

        A rebalance callback that ``close()`` serves itself can hang for ever: confluent-kafka's
        callback wrapper asks ``rd_kafka_rebalance_protocol()``, which waits on a group handler that is
        terminating (librdkafka issue 4041; seen here under load when a flow failed at start while
        its first join was under way). Bounded: whatever is left is close()'s, as before. Records
        polled here are dropped: none of them was copied, and nothing is committed for them."""
        deadline = time.monotonic() + _LEAVE_S
        try:
            self._consumer.unsubscribe()
            quiet = 0
            while time.monotonic() < deadline and quiet < 2:
                served = self._consumer.poll(0.1) is not None
                quiet = 0 if served or self._consumer.assignment() else quiet + 1
        except (KafkaException, RuntimeError) as exc:  # a consumer in trouble: close() is all that is left
            _log.debug("flow %s: leaving the group before close: %s", self.flow.name, exc)

    def _run_wired(self, stop: threading.Event, until_caught_up: bool) -> FlowStats:
        assert self._clients is not None
        clients = self._clients
        self._starting(lambda: clients.topics.ensure_state_topic(self.config.state_topic), stop)
        requested = threading.Event()  # `failover apply --stop-replication` stops this flow only
        watcher = StopRequestWatcher(
            self.config.cluster(self.flow.target).client_config(),
            self.config.state_topic,
            self.flow.name,
            requested.set,
        )
        watcher.start()  # before `started`: whoever sees this run started can reach it
        previous = SharedPreviousRun(self._emit_lifecycle("started"))
        tasks = self._task_factory(
            self.config,
            self.flow,
            replicator_id=self.replicator_id,
            policy=self.policy,
            remote_topics=lambda: self._remote,
            assigned=lambda: self.stats.assigned,
            continuous=not until_caught_up,
            read_positions=self.read_positions.request,
            metrics=self.stats.mm2,
            extra=() if self.flow.exactly_once else (GapRecovery,),
        )
        self.stats.task_errors = tasks.errors
        self.stats.connectors = mm2_connectors(self.flow, continuous=not until_caught_up)
        self._tasks = tasks
        self._stop_flag = _Either(stop, requested)
        tasks.ctx.view.subscribe(Lifecycle.event_type, previous.take)
        tasks.ctx.view.subscribe(OffsetSync.event_type, previous.take)  # a peer that copied after the last stop
        tasks.ctx.view.subscribe(MetadataChange.event_type, self._take_metadata_change)
        try:
            # the mapping's lives: which topic id each source topic was copied under
            self._starting(tasks.ctx.view.refresh, stop)
            known = self._copied_topics(tasks.ctx.view.index) | self._created_topics
            self._metadata_sync.seed(known, self._decided_topics)
            if self._guarded(self._follower.refresh, "source", "target"):
                self._guarded(lambda: self._lives.check_source(self._consumer, "start"), "source")
                self._guarded(lambda: self._lives.check_target(self._consumer, "start"), "target")
            if not self.flow.exactly_once:  # exactly-once: copies without a sync were never committed
                # every assigned partition is recovered when assigned (``core.takeover``), the first
                # assignment's after a clean stop at its commits; the loop's view of the state log
                # starts where the tasks' is now: the state log is read once at start, not twice
                # ``previous`` hears the loop's view too: the first takeover judges the log as it
                # stands then, not as the state lane last read it (a slow audit holds that lane)
                self._previous = previous
                self._takeover_view = tasks.ctx.view.fork(
                    {Lifecycle.event_type: [previous.take], OffsetSync.event_type: [previous.take]}
                )
            self._starting(self.commits.start, stop)
            self.stats.state = "running"
            tasks.start()
            try:
                self._loop(self._stop_flag, until_caught_up)
                self._metadata_sync.finish()
                self._rebalance.commit_due(None)  # a last try: else the stop is not clean
                self.commits.close()
            except StopTimedOut as exc:
                self._deliveries.give_up(exc, self.commits)
                tasks.stop(flush_s=0, join_s=_TASKS_JOIN_S)
            else:
                self.read_positions.publish(self._replicated_positions(), final=True)
                # checkpoints and audits of everything copied; after a stop, within what is left of
                # its budget (a task whose client lost the cluster in an outage must not hold the exit)
                left = self._stop_budget.left()
                if left is None:  # ran until caught up
                    tasks.stop(final_round=True)
                else:
                    tasks.stop(final_round=True, join_s=max(left, _FINAL_ROUND_MIN_S), flush_s=_FINAL_ROUND_MIN_S)
                unclean = not self._own.clean or self.commits.left_behind
                self._emit_lifecycle("stopped", reason=LEFT_COPIES if unclean else None)
            self.stats.state = "stopped"
            stats = self.stats
            _log.info(
                "flow %s: copied %d records in %d batches (%.0f per batch)",
                self.flow.name,
                stats.records,
                stats.batches,
                stats.records / max(1, stats.batches),
            )
        except BaseException as exc:
            self.stats.state, self.stats.error = "failed", f"{type(exc).__name__}: {exc}"
            tasks.stop()
            self._emit_lifecycle("error", self.stats.error)
            raise
        finally:
            watcher.close()
            if self._takeover_view is not None:
                self._takeover_view.close()
        return self.stats

    def _starting(self, operation: Callable[[], _T], stop: threading.Event) -> _T:
        """A step of the flow's start, tried again while a cluster does not answer (a broker restarting
        as the process starts): a running flow waits out an outage, so a starting one does too. Only
        a stop ends the wait (then the step's error propagates); any other error at once."""
        while True:
            try:
                return operation()
            except (KafkaException, MirrorlakeError) as exc:
                if stop.is_set() or not self._outages.blame(("source", "target"), exc):
                    raise
                stop.wait(max(0.5, self._outages.delay_left("source"), self._outages.delay_left("target")))

    def _loop(self, stop: _StopFlag, until_caught_up: bool) -> None:
        next_refresh = next_metadata_sync = 0.0
        next_flush = time.monotonic() + self.flow.sync_interval_seconds
        at_least_once = not self.flow.exactly_once
        next_batch, keep_member = Batcher(self._consumer.consume).next, self._consumer.consume
        copy_batch, poll, deliveries = self._copier.copy_batch, self._data.poll, self._deliveries
        ledger, commits, copier = self.ledger, self.commits, self._copier
        while not stop.is_set():
            now = time.monotonic()
            paused = self._watch_outages()
            if self._rejoin.armed and not self._outages.is_waiting("source") and self._rejoin.due(now):
                self._rejoin_group()
            if now >= next_refresh and self._guarded(self._follower.refresh, "source", "target"):
                self._measure_lag()
                self._guarded(lambda: self._lives.check_source(self._consumer, "running"), "source")
                self._guarded(lambda: self._lives.check_target(self._consumer, "running"), "target")
                next_refresh = now + self.flow.refresh_topics_interval_seconds
            if now >= next_metadata_sync and self._metadata_sync.start_if_due():
                next_metadata_sync = now + self.flow.sync_topic_configs_interval_seconds
            if paused:  # wait for acknowledgements (or the back-off) instead of reading
                poll(_PAUSED_WAIT_S)
                # a call without wait keeps the group membership (max.poll.interval.ms) in a long outage
                # and serves rebalances; paused partitions return nothing, a just-assigned one may
                messages = keep_member(BATCH_MAX, timeout=0)
            else:
                messages = next_batch()
            if self._own.takeover_due(now):
                self._rebalance.take_over()
            if self._own.newly_assigned:  # before the resets are committed: it reads the commits they replace
                check = partial(self._lives.check_committed, self._consumer, self._own.take_newly_assigned())
                self._guarded(check, "source")
            self._rebalance.commit_due(now)
            if messages:
                copy_batch(messages)
            deliveries.poll()
            try:
                deliveries.check()
            except AbortTransaction as exc:
                commits.abort(str(exc))
            if at_least_once:
                if now >= next_flush:
                    ledger.flush()
                    next_flush = now + self.flow.sync_interval_seconds
                deliveries.publish_syncs()
            commits.after_batch()
            if self.read_positions.wanted:
                self.read_positions.publish(self._replicated_positions())
            if (
                until_caught_up
                and not messages
                and not self._own.held  # held partitions are not the consumer's yet
                and self._caught_up(copier.in_flight, bool(self._remote))
            ):
                break

    def _consumer_error(self, err: KafkaError) -> None:
        if err.fatal() or err.code() in AUTHORIZATION_CODES:  # waiting would only stall: nobody grants it
            raise ReplicationError(f"flow {self.flow.name}: consumer error: {err.str()}") from KafkaException(err)
        if not self._outages.failed("source", KafkaException(err)):
            _log.warning("flow %s: consumer error: %s", self.flow.name, err.str())

    # -- outages -----------------------------------------------------------------------------
    def _watch_outages(self) -> bool:
        """Probe the clusters waited for, pause or resume reading; True while reading is paused."""
        outages = self._outages
        outages.probe_due()
        paused = self._backpressure.update()
        stats = self.stats
        stats.paused, stats.recoveries = paused, outages.recoveries
        stats.turned_at = time.monotonic()
        return paused

    def _guarded(self, operation: Callable[[], object], *sides: Side) -> bool:
        """Run an admin ``operation`` touching ``sides`` unless one is backing off; True if it ran.

        A transient failure (a timeout, a broker down) starts a wait for the sides that do not
        answer and is retried after the back-off; any other failure propagates.
        """
        if not all(self._outages.due(side) for side in sides):
            return False
        try:
            operation()
        except ADMIN_ERRORS as exc:
            if not self._outages.blame(sides, exc):
                raise
            return False
        return True

    @property
    def client_failure(self) -> KafkaError | None:
        """What made a client of the flow unusable, as its callbacks saw it (``Deliveries.client_failure``)."""
        return self._deliveries.client_failure

    # -- rebalances and topics ---------------------------------------------------------------
    def _subscribe(self, topics: list[str]) -> None:
        self.stats.subscribed = bool(topics)
        if topics:
            rebalance = self._rebalance
            self._consumer.subscribe(
                topics, on_assign=rebalance.on_assign, on_revoke=rebalance.on_revoke, on_lost=rebalance.on_lost
            )
        else:
            self._consumer.unsubscribe()

    def _rejoin_group(self) -> None:
        """Subscribe anew: librdkafka did not rejoin after losing the partitions (``flow.rejoin``)."""
        _log.warning(
            "flow %s: no partitions assigned %.0f s after they were lost: joining the consumer group again",
            self.flow.name, _REJOIN_AFTER_S,
        )  # fmt: skip
        self.stats.rejoins = self._rejoin.rejoins
        self._subscribe_again()

    def _subscribe_again(self) -> None:
        """Leave the group and join it again (a fresh fetch state) with the follower's selection."""
        self._consumer.unsubscribe()
        self._subscribe(list(self._remote))

    def _forget_copies(self, keys: set[TP]) -> None:
        self._copier.forget(keys)  # before the ledger: what was delivered is handed over first
        self.ledger.forget(keys)

    def _forget(self, gone: set[TP], partitions: list[TopicPartition]) -> None:
        """What the runner's pieces keep for partitions no longer this process's (the ownership forgot them)."""
        self._forget_copies(gone)
        self._backpressure.forget(partitions)

    def _recover(self, selected: list[tuple[str, str, int]]) -> Recovery:
        """The takeover's recovery (``Rebalance.take_over``), judged on the loop's own view of the state log."""
        assert self._clients is not None  # wired
        if self._takeover_view is None:
            self._takeover_view = StateView(self.config, self.flow)
        recovery = recover_orphan_copies(
            self.config, self.flow, self.replicator_id, self._clients.lifecycle_producer, selected,
            self._takeover_view, skipped=lambda headers: not self._provenance.stamp(headers)[0],
            previous=self._previous,
        )  # fmt: skip
        self._previous = None  # a clean stop speaks for the commits of the first assignment only
        return recovery

    def _measure_lag(self) -> None:
        """Per assigned partition: source high watermark minus our position (cached watermarks)."""
        lag, positions = {}, 0
        for tp in self._consumer.position(self._consumer.assignment()):
            if tp.offset >= 0:
                _low, high = self._consumer.get_watermark_offsets(tp, cached=True)
                lag[(tp.topic, tp.partition)] = max(0, high - tp.offset)
                positions += tp.offset
        self.stats.lag = lag
        self._watch_stall(positions)

    def _watch_stall(self, positions: int) -> None:
        """Records behind, no outage, and neither the positions nor the acknowledgements move: say
        so (log, ``/health``), resume every partition, then join the group anew (``flow.stall``)."""
        now, stats = time.monotonic(), self.stats
        behind = sum(stats.lag.values())
        progress = (positions, stats.records - self._copier.in_flight)
        remedy = self._stall.observe(now, progress, behind, bool(self._outages.waiting))
        held = self._stall.stalled_s(now)
        if remedy:
            stats.stalled = f"nothing copied for {held:.0f} s with {behind} records behind and no outage"
        if remedy == RESUME:
            _log.warning(
                "flow %s: %s (%d partitions assigned, reading %s, %d records queued for the target, %d in "
                "flight): resuming every partition",
                self.flow.name, stats.stalled, len(self._own.assigned), "paused" if stats.paused else "not paused",
                len(self._data), self._copier.in_flight,
            )  # fmt: skip
            self._backpressure.resume_all()
        elif remedy == REJOIN:
            _log.warning("flow %s: still %s: joining the consumer group again", self.flow.name, stats.stalled)
            self._subscribe_again()
        elif held == 0 and stats.stalled is not None:
            _log.warning("flow %s: copying again after a stall", self.flow.name)
            stats.stalled = None

    def _replicated_positions(self) -> dict[tuple[str, int], int]:
        """Per assigned source partition with a position, the next offset not known to be on the
        target: the consumer's position (past markers and aborted records), held back to the oldest
        record still in flight and, exactly-once, to the last committed transaction."""
        oldest = self._copier.oldest_in_flight()
        unsettled = self.commits.unsettled()
        out = {}
        for tp in self._consumer.position(self._consumer.assignment()):
            key = (tp.topic, tp.partition)
            held = unsettled.get(key, tp.offset)
            if tp.offset >= 0 and held is not None:
                out[key] = min(tp.offset, oldest.get(key, tp.offset), held)
        return out

    def _copied_topics(self, index: MappingIndex) -> dict[str, str]:
        """Source topic -> remote topic of every topic the mapping says this flow copied."""
        name = self.flow.name
        topics = {topic for _f, topic, _p in index.partitions(name)}
        return {t: index.target_topic(name, t) or self.policy.format_remote_topic(self.flow.source, t) for t in topics}

    def _take_metadata_change(self, event: Event) -> None:
        """The ACL bindings the flow created (every process's events, read back): what deletions may
        touch; and the source topics whose deletion was decided already."""
        if not isinstance(event, MetadataChange) or event.flow != self.flow.name:
            return
        if event.kind == "topic":
            if event.action == "created":  # made by the flow (again, after a deletion: undecided)
                self._created_topics[event.source_topic] = event.topic
                self._decided_topics.discard(event.source_topic)
            else:
                self._decided_topics.add(event.source_topic)
            return
        if self._clients is not None and event.acl and event.source_acl:
            self._clients.acl_sync.created.take(
                event.action, event.topic, event.acl, event.source_topic, event.source_acl
            )

    def _emit_event(self, event: Event) -> None:
        """Emit a state event outside any transaction; the loop's polling delivers it."""
        if self._clients is not None:
            StateLog(self._clients.lifecycle_producer, self.config.state_topic).emit(event)

    def _emit_durably(self, event: Event) -> None:
        if self._clients is None:
            return
        producer = self._clients.lifecycle_producer
        log = StateLog(producer, self.config.state_topic)
        log.emit(event)
        if not log.flushed():
            raise ReplicationError(
                f"flow {self.flow.name}: {event.event_type} event not acknowledged by {self.flow.target}"
            )

    # -- lifecycle ---------------------------------------------------------------------------
    def _emit_lifecycle(self, state: str, reason: str | None = None) -> Lifecycle:
        event = Lifecycle(flow=self.flow.name, replicator_id=self.replicator_id, state=state, reason=reason)
        if self._clients is None:
            return event  # the clients were never made (the cluster was unreachable)
        producer = self._clients.lifecycle_producer
        StateLog(producer, self.config.state_topic).emit(event)
        producer.flush(10)
        return event
