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
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from replicator.access.permissions import AUTHORIZATION_CODES
from replicator.client.group_offsets import committed_offsets
from replicator.client.mapping import Segment
from replicator.client.mapping_index import Life, MappingIndex
from replicator.client.policy import ReplicationPolicy, policy_from_config
from replicator.client.provenance import Provenance
from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.config.topology import provenance_enabled
from replicator.errors import MirrorlakeError, ReplicationError
from replicator.events import Event, Lifecycle, MetadataChange, OffsetSync
from replicator.flow.clients import ClientFactory, FlowClients, kafka_clients
from replicator.flow.control.caught_up import CaughtUpCheck
from replicator.flow.control.outage import ADMIN_ERRORS, TRANSPORT_CODES, Side, transient
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
from replicator.flow.core.ownership import Ownership, Start
from replicator.flow.core.resume import LEFT_COPIES
from replicator.flow.core.sync_ledger import TP, SyncLedger
from replicator.flow.syncs.commits import AbortTransaction, AtLeastOnceCommits, Commits, TransactionalCommits
from replicator.flow.syncs.gap_recovery import GapRecovery
from replicator.flow.syncs.previous_runs import SharedPreviousRun
from replicator.flow.syncs.tail_recovery import TailRecovery, publish_syncs, recover_orphan_copies
from replicator.flow.topics.metadata_sync import TopicMetadataSync
from replicator.flow.topics.remote_lives import RemoteLives
from replicator.flow.topics.topic_follower import TopicFollower
from replicator.flow.topics.topic_lives import TopicLives
from replicator.kafka.admin import admin_client
from replicator.kafka.errors import FATAL_CODES, PURGED_CODES, kafka_error, kafka_error_reason
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

# exactly-once: a record not acknowledged within the transaction timeout (a long outage), or one
# whose batch the target refused after an outage for its producer sequence (librdkafka then fails
# the transaction abortably and bumps the epoch at the abort), is copied again from the committed position
_REWINDABLE = TRANSPORT_CODES | {KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, KafkaError.UNKNOWN_PRODUCER_ID}
# a write to a partition the target does not know: its remote topic may be gone (``_remote_topic_gone``)
_TOPIC_GONE = frozenset({KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART})
# three session timeouts (settings: 10 s) after a loss with no assignment: join the group anew
_REJOIN_AFTER_S = 30.0
# a commit refused because the group moved on: the member was fenced or a rebalance runs
_REBALANCE_CODES = frozenset(
    {KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS}
)
_DRAIN_SLICE_S = 1.0  # a drain waits in slices, watching outages between them
_T = TypeVar("_T")
_TASKS_JOIN_S = 5.0  # a stop that gave up on the target waits this long for a state task in progress
_LEAVE_S = 5.0  # at most this long serving the last rebalance before close() (``_leave_group``)
_FINAL_ROUND_MIN_S = 10.0  # the state tasks' last round after a stop, even when the drain spent the budget
_PAUSED_WAIT_S = 0.1  # while reading is paused, the loop waits on deliveries this long per turn

TaskFactory = Callable[..., StateTasks]


def _refused_for_now(exc: KafkaException) -> bool:
    """A commit refused by an outage or because the group moved on (to try again, not to fail for)."""
    err = kafka_error(exc)
    return transient(exc) or (err is not None and err.code() in _REBALANCE_CODES)


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
        self._known_at_start: dict[TP, int] = {}  # one past the last copy the mapping knew at start
        # per partition, the target offset before which every copy is of the topic the flow knows (its
        # id confirmed by a check after the copy): a re-created topic's copies are looked for past it
        self._sure_until: dict[TP, int] = {}
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
        self._beside: tuple[Producer, ...] = () if self._data is self._producer else (self._producer,)
        self._backpressure = Backpressure(
            self.flow.name, self._consumer, self._data, self._outages,
            lambda: self.stats.records - self._copier.in_flight, lambda: self._copier.in_flight,
            high=QUEUE_MAX_MESSAGES // 2, low=QUEUE_MAX_MESSAGES // 4,
        )  # fmt: skip
        self._state = StateLog(self._producer, self.config.state_topic)
        origin = SyncOrigin(self.flow.name, self.replicator_id, self.flow.source, self.flow.target)
        topic_ids: dict[str, str] = {}  # the source topics' ids every sync carries (flow.topic_lives)
        remote_ids: dict[str, str] = {}  # and their remote topics' ids (flow.remote_lives)
        self.ledger = SyncLedger(
            origin, self.flow.offset_lag_max, self._state, self._producer.poll, topic_ids, remote_ids
        )
        self._lives_admin = admin_client(self.config.cluster(self.flow.source).client_config())
        self._lives = TopicLives(
            self.flow, self.replicator_id, self._lives_admin, self._known_topic_id, self._emit_durably, self.stats,
            topic_ids, self._unproven_life, self._stopped_life,
        )  # fmt: skip
        self._remote_lives = RemoteLives(
            self.flow, self.replicator_id, admin_client(self.config.cluster(self.flow.target).client_config()),
            self._known_remote_id, self._copied_until, self._emit_durably, self.stats, remote_ids,
            self._stopped_life,
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
                self._guarded(lambda: self._check_lives("start"), "source")
                self._guarded(lambda: self._check_remote_lives("start"), "target")
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
                if (due := self._own.resets(now=None)) is not None:  # a last try: else the stop is not clean
                    self._commit_resets(*due)
                self.commits.close()
            except StopTimedOut as exc:
                self._give_up(exc, tasks)
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
        copy_batch, poll, beside = self._copier.copy_batch, self._data.poll, self._beside
        ledger, commits, copier = self.ledger, self.commits, self._copier
        while not stop.is_set():
            now = time.monotonic()
            paused = self._watch_outages()
            if self._rejoin.armed and not self._outages.is_waiting("source") and self._rejoin.due(now):
                self._rejoin_group()
            if now >= next_refresh and self._guarded(self._follower.refresh, "source", "target"):
                self._measure_lag()
                self._guarded(lambda: self._check_lives("running"), "source")
                self._guarded(lambda: self._check_remote_lives("running"), "target")
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
                self._take_over()
            if self._own.newly_assigned:  # before the resets are committed: it reads the commits they replace
                self._check_newly_assigned()
            if (due := self._own.resets(now)) is not None:
                self._commit_resets(*due)
            if messages:
                copy_batch(messages)
            poll(0)
            for producer in beside:
                producer.poll(0)
            try:
                self._check_failures()
            except AbortTransaction as exc:
                commits.abort(str(exc))
            if at_least_once:
                if now >= next_flush:
                    ledger.flush()
                    next_flush = now + self.flow.sync_interval_seconds
                self._publish_syncs()
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

    # -- offset syncs ------------------------------------------------------------------------
    def _publish_syncs(self) -> None:
        if self.ledger.has_pending:
            self.ledger.publish()
            self.stats.syncs = self.ledger.published

    def _drain(self) -> None:
        """Wait for every record and sync in flight, publishing the syncs they produce.

        Once the flow is asked to stop, it waits ``stop_timeout_seconds`` at most (``StopTimedOut``).
        """
        while True:
            self._data.flush(_DRAIN_SLICE_S)
            for producer in self._beside:
                producer.flush(_DRAIN_SLICE_S if len(self._data) == 0 else 0)
            self._check_failures()
            if self._queued():
                self._watch_outages()  # the target is down or slow: say so (health, metrics) and keep waiting
                self._stop_budget.check(f"acknowledgement by {self.flow.target} of what is in flight")
                continue
            self.ledger.flush()
            if not self.ledger.has_pending and self._queued() == 0:
                return
            self._publish_syncs()

    @property
    def client_failure(self) -> KafkaError | None:
        """What made a client of the flow unusable, as its callbacks saw it: a write refused (a fenced
        producer's reports, of copies or of state events) or a fatal client error. For an exception that
        lost its cause (``runtime._named``). A fatal error first, a purged message last: a purge is what a
        failure left behind (a fenced producer's queued copies), not the failure (test_fenced_flow saw
        "Local: Purged in queue" named while the state events' deliveries held the fencing)."""
        seen = [e for e in (self._copier.delivery_error, self._state.failed, self._outages.fatal) if e is not None]
        return min(seen, key=lambda e: (e.code() not in FATAL_CODES, e.code() in PURGED_CODES), default=None)

    def _queued(self) -> int:
        """Messages not yet acknowledged: copies, syncs and lifecycle events."""
        return len(self._data) + sum(len(producer) for producer in self._beside)

    def _give_up(self, exc: StopTimedOut, tasks: StateTasks) -> None:
        """Stop without what the target has not acknowledged: commit only what is durable, drop the rest."""
        records, queued = self._copier.in_flight, self._queued()
        if isinstance(self.commits, TransactionalCommits):  # everything since the last commit is dropped
            span, unknown = self.commits.open_transaction_span()
            _log.warning(
                "flow %s: stopping without committing the open transaction (%s): %d source offsets consumed "
                "since the last commit%s are dropped (%d of its records not acknowledged by %s); a restart "
                "resumes from the positions committed on %s",
                self.flow.name, exc, span,
                f" (plus {unknown} partitions with no committed position yet)" if unknown else "",
                records, self.flow.target, self.flow.target,
            )  # fmt: skip
        else:
            _log.warning(
                "flow %s: stopping without flushing %d copied records (%d messages with offset syncs) that %s "
                "did not acknowledge (%s): source offsets were committed only up to what durable offset syncs "
                "cover; a restart copies the rest again",
                self.flow.name, records, queued, self.flow.target, exc,
            )  # fmt: skip
        self.commits.give_up()
        for producer in (self._data, *self._beside):
            producer.purge()  # nothing waits on them now: the producer closes at once
        tasks.stop(flush_s=0, join_s=_TASKS_JOIN_S)

    def _check_failures(self) -> None:
        """Raise for a failed write; ``AbortTransaction`` if an exactly-once flow can retry it by rewinding."""
        err = self._copier.delivery_error
        failed = self._copier.transaction_failed
        # a refusal that is not rewindable is raised below, even when the transaction it failed is known
        if self.flow.exactly_once and (err.code() in _REWINDABLE if err is not None else failed is not None):
            self._copier.delivery_error = self._copier.transaction_failed = None  # one abort rewinds both
            why = err.str() if err is not None else f"the open transaction failed: {failed and failed.str()}"
            raise AbortTransaction(f"records not acknowledged by {self.flow.target}: {why}")
        err = self._copier.delivery_error
        if err is not None and err.code() in _TOPIC_GONE:
            self._remote_topic_gone(err)
        for err in (self._copier.delivery_error, self._copier.transaction_failed, self._state.failed):
            if err is not None:
                raise ReplicationError(
                    f"flow {self.flow.name}: write to {self.flow.target} failed: {err.str()}"
                ) from KafkaException(err)

    # -- rebalances and topics ---------------------------------------------------------------
    def _subscribe(self, topics: list[str]) -> None:
        self.stats.subscribed = bool(topics)
        if topics:
            self._consumer.subscribe(
                topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
            )
        else:
            self._consumer.unsubscribe()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        _log.info("flow %s: assigned %s", self.flow.name, _names(partitions))
        if self._own.closing:  # a join that ended while leaving (``_leave_group``): the client assigns them
            return
        self._rejoin.assigned()
        if self.flow.exactly_once:
            self.commits.on_assign(consumer, partitions)
            self._own.assign([((tp.topic, tp.partition), None) for tp in partitions])
        else:
            relive = self._lives.relive((tp.topic, tp.partition) for tp in partitions)  # a re-created topic's
            starts = [((tp.topic, tp.partition), _start(tp)) for tp in partitions]
            consumer.incremental_assign(_positions(self._own.assign(starts, relive)))
            if held := self._own.held:
                _log.info("flow %s: %s held until the copies their last owner left are recovered",
                          self.flow.name, _names([TopicPartition(t, p) for t, p in held]))  # fmt: skip
        self.stats.assigned = sorted(self._own.assigned)

    def _take_over(self) -> None:
        """Recover the held partitions' copies (``core.takeover``), then assign them past those copies.

        On the loop's thread, outside any rebalance callback, against the state log as it stands now:
        a recovery made at start, before the group assigned anything, could be overtaken by a peer
        that copied on and was then killed (seed 197 of the soak: 139 second copies of a partition
        whose start recovery ran while its owner still copied). A cluster that does not answer keeps
        them held and is asked again after its back-off (they would only wait for it anyway)."""
        held = self._own.held
        assert self._clients is not None  # wired
        relive = [k for k in held if k in self._lives.reliving]
        selected = [(t, self._remote[t].target_topic, p) for t, p in held if t in self._remote and (t, p) not in relive]
        if self._takeover_view is None:
            self._takeover_view = StateView(self.config, self.flow)
        view = self._takeover_view
        try:
            new_starts = self._relive(relive)
            # judged on the state log as it stands now, not at start: a peer may have copied (and
            # been killed) since (``core.takeover``)
            recovery = recover_orphan_copies(
                self.config, self.flow, self.replicator_id, self._clients.lifecycle_producer, selected, view,
                skipped=lambda headers: not self._provenance.stamp(headers)[0], previous=self._previous,
            )  # fmt: skip
        except (KafkaException, MirrorlakeError) as exc:
            if not self._outages.blame(("source", "target"), exc):
                raise
            wait = max(1.0, self._outages.delay_left("source"), self._outages.delay_left("target"))
            self._own.takeover_failed(time.monotonic(), wait)
            return
        self._previous = None  # a clean stop speaks for the commits of the first assignment only
        starts = self._own.taken_over(held, recovery.resume_at, new_starts)
        self._consumer.incremental_assign(_positions(starts))
        for (t, p), offset in starts:
            if offset is not None and (t, p) not in new_starts:
                _log.info("flow %s: %s[%d] resumes at %d, past the copies its last owner made",
                          self.flow.name, t, p, offset)  # fmt: skip
        self.stats.assigned = sorted(self._own.assigned)

    def _relive(self, keys: list[TP]) -> dict[TP, int]:
        """Where each of a re-created topic's partitions (assigned, held) starts: past the copies of its
        new topic's records on the target, matched by content from the target's log start (at most
        ``max_tail`` records back); their syncs wait in the ownership's ``new_life_syncs`` for the
        start's commit."""
        out: dict[TP, int] = {}
        matched: list[OffsetSync] = []
        for topic in sorted({t for t, _p in keys if t in self._remote}):  # else dropped from the selection
            mine = {k: 0 for k in keys if k[0] == topic}
            syncs, at = self._match_new_life(topic, self._lives.ids[topic], mine)
            matched += syncs
            for t, p in mine:  # one missing on either cluster: from the log start (offset 0 is reset to it)
                out[(t, p)] = at.get((t, p), 0)
                _log.info("flow %s: %s[%d], of a re-created topic, starts at %d, past the copies of its new records",
                          self.flow.name, t, p, at.get((t, p), 0))  # fmt: skip
        self._own.matched(matched)  # all at once: a failed attempt is made again whole
        return out

    def _recovery(self) -> TailRecovery:
        origin = SyncOrigin(self.flow.name, self.replicator_id, self.flow.source, self.flow.target)
        source, target = (self.config.cluster(alias).client_config() for alias in (self.flow.source, self.flow.target))
        return TailRecovery(origin, source, target)

    def _current_lives(self, topic: str | None = None) -> Iterator[tuple[TP, Life, list[Segment]]]:
        """Each partition of the flow (of ``topic`` only, if given) with its mapping's current life and
        that life's segments, as the state tasks' view knows them (nothing before the view is made)."""
        if self._tasks is None:
            return
        index = self._tasks.ctx.view.index
        for _f, t, partition in index.partitions(self.flow.name):
            if topic is None or t == topic:
                yield (
                    (t, partition),
                    index.life(self.flow.name, t, partition),
                    index.segments(self.flow.name, t, partition),
                )

    def _known_copied(self) -> dict[TP, int]:
        """Per source partition of the flow, one past the last copy its mapping (current life) knows."""
        return {tp: max(s.upstream_end for s in segs) + 1 for tp, _life, segs in self._current_lives() if segs}

    def _check_newly_assigned(self) -> None:
        """Each newly assigned partition's commit, against the source's log start: past it, the records
        between were deleted before their copy (the consumer resets to the log start and goes on). The
        check at start looks once, through the group's committed offsets; this one sees every
        assignment, in whichever process it lands (each says it under the loss's own event id:
        readers count it once). On the loop's thread, before the partition's first copy. The copies
        known are those of the mapping at start (the view is the state tasks' meanwhile): copies a
        process killed since left past its commit may be counted lost."""
        tps = [TopicPartition(t, p) for t, p in self._own.take_newly_assigned()]
        try:
            committed = self._consumer.committed(tps, timeout=10)
        except KafkaException as exc:
            _log.warning("flow %s: committed positions unreadable (%s): a deletion before the copy may go unsaid",
                         self.flow.name, exc)  # fmt: skip
            return
        found = {(tp.topic, tp.partition): tp.offset for tp in committed if tp.error is None and tp.offset >= 0}
        if found:
            self._guarded(lambda: self._lives.check_committed(found, self._known_at_start, "running"), "source")

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        _log.info("flow %s: revoked %s", self.flow.name, _names(partitions))
        if not self._own.closing:
            self.commits.before_revoke([tp for tp in partitions if (tp.topic, tp.partition) in self._own.assigned])
        held = self._own.revoke((tp.topic, tp.partition) for tp in partitions)
        self._forget(partitions)
        self.stats.revoked += len(partitions)
        self._unassign_all_but(consumer, partitions, held)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        _log.warning("flow %s: lost %s", self.flow.name, _names(partitions))
        self._rejoin.lost(time.monotonic())
        self.commits.after_lost(partitions)
        held = self._own.lose((tp.topic, tp.partition) for tp in partitions)
        self._forget(partitions)
        self._unassign_all_but(consumer, partitions, held)

    @staticmethod
    def _unassign_all_but(consumer: Consumer, partitions: list[TopicPartition], held: set[TP]) -> None:
        """Partitions taken away while held for recovery were never assigned to the consumer: only
        the others are unassigned (the client would refuse the whole list). Last in the callback:
        the positions of the others are committed first."""
        if held:
            consumer.incremental_unassign([tp for tp in partitions if (tp.topic, tp.partition) not in held])

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

    def _forget(self, partitions: list[TopicPartition]) -> None:
        """What the runner's pieces keep for partitions no longer this process's (the ownership forgot them)."""
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self._lives.relived(gone, committed=False)  # matched again at their next assignment here
        self._copier.forget(gone)  # before the ledger: what was delivered is handed over first
        self.ledger.forget(gone)
        self._backpressure.forget(partitions)
        self.stats.assigned = sorted(self._own.assigned)
        for tp in gone:
            self.stats.lag.pop(tp, None)

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

    # -- topic lives ---------------------------------------------------------------------------
    def _remote_topic_gone(self, err: KafkaError) -> None:
        """A write failed for a partition the target does not know: name the remote topics that are gone."""
        try:
            gone = self._remote_lives.missing(self._remote)
        except KafkaException:
            return  # the target unreadable: the write's own error is said
        if gone:
            raise ReplicationError(
                f"flow {self.flow.name}: remote topic {', '.join(map(repr, gone))} on {self.flow.target} was "
                f"deleted while the flow ran ({err.str()}): the flow stops. Its copies are gone: the next start "
                "creates the topic again and, under on_remote_topic_recreated: recopy (the default), copies the "
                "source topic again from its log start"
            ) from KafkaException(err)

    def _known_remote_id(self, topic: str) -> str | None:
        """The remote topic id the mapping's current life of ``topic`` was copied into (None: unknown)."""
        return next(
            (life.target_topic_id for _tp, life, _s in self._current_lives(topic) if life.target_topic_id), None
        )

    def _copied_until(self, topic: str) -> dict[int, int]:
        """Per partition of ``topic``, one past the last target offset its mapping's current life knows."""
        return {
            tp[1]: max(s.downstream_end for s in segs) + 1 for tp, _life, segs in self._current_lives(topic) if segs
        }

    def _known_topic_id(self, topic: str) -> str | None:
        """The id the mapping's current life of ``topic`` was copied under (None: unknown)."""
        return next((life.topic_id for _tp, life, _s in self._current_lives(topic) if life.topic_id), None)

    def _unproven_life(self, topic: str, partition: int) -> bool:
        """The partition's current life holds no copy, only a ``TopicRecreated`` said it (``unproven_life``)."""
        return self._tasks is not None and self._tasks.ctx.view.index.unproven_life(self.flow.name, topic, partition)

    def _stopped_life(self, topic: str, partition: int) -> str | None:
        """The side whose re-creation, said under ``stop``, started the partition's uncopied current life."""
        if self._tasks is None:
            return None
        return self._tasks.ctx.view.index.stopped_life(self.flow.name, topic, partition)

    def _check_lives(self, noticed: str) -> None:
        """Re-created topics (``flow.topic_lives``); records deleted before their copy (``ledger.gaps``)."""
        copied = {tp: self.ledger.last_copy(tp) for tp in self._own.assigned}  # before the check: of the topic it sees
        recreated = self._lives.check(self._remote, noticed)
        for tp, last in copied.items():
            if last is not None and tp[0] in self._lives.confirmed:
                self._sure_until[tp] = last[1] + 1  # copies before this target offset are of the known topic
        if noticed == "start" and not self.flow.exactly_once:  # committed positions the log start passed
            self._known_at_start = self._known_copied()
            self._lives.check_committed(self._read_committed(set(self._remote)), self._known_at_start)
        if recreated and noticed == "running":
            self._drain()  # the old life's copies and syncs, under the old id
        for r in recreated:
            self._lives.adopt(r.topic)
            if noticed == "running":  # at start: each partition is matched when assigned (``_relive``)
                self._restart_topic(r.topic, r.topic_id)  # said (``announce``) once its starts are committed
                if not any(t == r.topic for t, _p in self._own.assigned):
                    self._lives.announce(r.topic)
        gaps, self.ledger.gaps = self.ledger.gaps, []
        self._lives.check_gaps(gaps)

    def _check_remote_lives(self, noticed: str) -> None:
        """Remote topics that lost their copies (``flow.remote_lives``): their source topics copied again
        from the log start. At start each partition is matched when assigned (``_relive``); running,
        the copies made before are drained under the old id, then the assigned partitions move."""
        lives = self._remote_lives
        recreated = lives.check(self._remote, noticed) if noticed == "start" else lives.poll(self._remote)
        if recreated and noticed == "running":
            self._drain()
        for r in recreated:
            self._remote_lives.adopt(r.topic)
            if noticed == "running":
                self._restart_topic(r.topic, self._lives.ids.get(r.topic), remote=True)
            else:
                self._lives.pending_reset.update((r.topic, p) for p in range(r.partitions))

    def _restart_topic(self, topic: str, topic_id: str | None, remote: bool = False) -> None:
        """Move a re-created topic's assigned partitions to their new start, a new session each: past
        the copies of its records made before the flow noticed it (under the old id), found by content
        (``TailRecovery.new_life``). Their syncs of the new life are published after the start is
        committed: a crash in between finds the old id at restart and matches them again."""
        mine = [tp for tp in self._own.assigned if tp[0] == topic]
        # a new remote topic holds nothing of the old: matched from its offset 0
        since = {key: 0 if remote else self._sure_until.get(key, 0) for key in mine}
        for key in mine:
            self._sure_until.pop(key, None)
        syncs, starts = self._match_new_life(topic, topic_id, since)
        moved = {key: starts.get(key, 0) for key in mine}
        self._copier.forget(set(mine))
        self.ledger.forget(mine)
        for tp in _positions(list(moved.items())):
            self._consumer.seek(tp)
        self._own.moved(moved, syncs)
        self._lives.relive(mine)  # the others are matched when assigned; these, again if revoked uncommitted
        if (due := self._own.resets(now=None)) is not None:  # now, or again in 1 s when a rebalance refuses it
            self._commit_resets(*due)

    def _match_new_life(
        self, topic: str, topic_id: str | None, since: dict[TP, int]
    ) -> tuple[list[OffsetSync], dict[TP, int]]:
        """The copies of a re-created topic's records on the target, per partition of ``since`` searched
        from that target offset on, as syncs of the new life; and where each partition goes on past them."""
        target_topic = self._remote[topic].target_topic
        wanted = [(t, target_topic, p, d_from) for (t, p), d_from in since.items()]
        return self._recovery().new_life(wanted, topic_id, self._remote_lives.ids.get(topic))

    def _publish_matched(self, syncs: list[OffsetSync]) -> None:
        """Publish, durably, the syncs of copies matched by content (not the ledger's)."""
        if syncs and self._clients is not None:
            publish_syncs(self.config, self.flow, self._clients.lifecycle_producer, syncs)

    def _commit_resets(self, reset: list[tuple[TP, int]], resumed: list[tuple[TP, int]]) -> None:
        """Commit a re-created topic's partitions' new starts, then publish the syncs of the copies
        matched before them and say so (``announce``); and the starts past known copies (the flow's
        position then says where it stands). Refused in a rebalance or an outage: again in 1 s."""
        if reset and not self.flow.exactly_once:
            # stored too: the auto-commit would otherwise commit the old life's stored position over
            # this one (a seek keeps it), and a crash before the next copy would resume there
            try:
                self._consumer.store_offsets(offsets=_positions(reset))
            except KafkaException as exc:  # not assigned any more: its next owner positions it
                _log.debug("flow %s: store_offsets: %s", self.flow.name, exc)
        try:
            self._consumer.commit(offsets=_positions(reset + resumed), asynchronous=False)
        except KafkaException as exc:
            if not _refused_for_now(exc):
                raise
            _log.warning("flow %s: start positions not committed yet (%s): trying again in 1 s",
                         self.flow.name, kafka_error_reason(exc))  # fmt: skip
            self._own.resets_refused(reset, resumed, time.monotonic())
            return
        keys = [key for key, _offset in reset]
        self._lives.relived(keys, committed=True)
        self._publish_matched(self._own.resets_committed(reset))
        for topic in sorted({t for t, _p in keys}):
            self._lives.announce(topic)

    def _read_committed(self, topics: set[str]) -> dict[tuple[str, int], int]:
        source = self.config.cluster(self.flow.source).client_config()
        found = committed_offsets(source, consumer_group_id(self.flow), sorted(topics))
        return {(o.topic, o.partition): o.offset for o in found}

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


def _names(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions) or "nothing"


def _positions(starts: list[Start] | list[tuple[TP, int]]) -> list[TopicPartition]:
    """The consumer's view of ``starts`` (None: no start of its own, the committed position)."""
    return [TopicPartition(t, p, OFFSET_INVALID if offset is None else offset) for (t, p), offset in starts]


def _start(tp: TopicPartition) -> int | None:
    """A partition's start as the group gave it (None: no start of its own)."""
    return None if tp.offset == OFFSET_INVALID else tp.offset
