"""Running the enabled flows of a config, from Python or from the CLI.

``Replicator`` owns one thread per flow (each flow has its own clients, so flows never block
each other) and one stop signal. ``run_until_caught_up`` is for batch use (demos, tests, planned
failover): it returns once every flow has copied everything its source had.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from confluent_kafka import KafkaError
from prometheus_client import CollectorRegistry

from replicator.access.permissions import authorization_failure
from replicator.client.policy import policy_from_config
from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.config.topology import check_loop_free
from replicator.errors import ConfigError, MirrorlakeError, PortInUseError, ReplicationError
from replicator.flow.copying.copycore import copies_natively
from replicator.flow.runner import FlowRunner, FlowStats
from replicator.kafka.errors import FATAL_CODES, PURGED_CODES, fatal_client_error
from replicator.kafka.settings import default_replicator_id, transactional_id
from replicator.metrics.observability import FlowCollector, StatusServer, waiting_for

__all__ = ["Replicator", "named_failure"]

_log = logging.getLogger(__name__)


@dataclass
class _Running:
    runner: FlowRunner
    thread: threading.Thread
    error: BaseException | None = None


class Replicator:
    """Start and stop the flows of one config; ``flows`` narrows them (``A->B`` names).

    ``status_port``: where /metrics and /health are served (0: any free port, None: nowhere);
    by default the config's ``status_port``.
    """

    def __init__(
        self,
        config: MirrorlakeConfig,
        *,
        flows: list[str] | None = None,
        target_clusters: list[str] | None = None,
        status_port: int | None | Literal["config"] = "config",
    ) -> None:
        self.config = config
        self.replicator_id = config.replicator_id or default_replicator_id()
        selected: list[FlowConfig] = list(config.enabled_flows())
        if flows:
            selected = [config.flow(name) for name in flows]
        if target_clusters:
            for alias in target_clusters:
                config.cluster(alias)
            selected = [f for f in selected if f.target in target_clusters]
        if not selected:
            raise ConfigError("no enabled flow to run (check 'flows' in the config and --flow/--clusters)")
        self.flows = selected
        self.policy = policy_from_config(config.replication_policy)
        check_loop_free(config, self.policy)
        for flow in selected:  # copy_engine native where it cannot run: refused before any flow starts
            if flow.copy_engine == "native":
                copies_natively(flow)
        self._stop = threading.Event()
        self._running: list[_Running] = []
        self._status_port = config.status_port if status_port == "config" else status_port
        self._status: StatusServer | None = None
        self.registry = CollectorRegistry()
        self.registry.register(FlowCollector(lambda: [(r.runner.flow.name, r.runner.stats) for r in self._running]))

    def start(self, *, until_caught_up: bool = False) -> None:
        if self._running:
            raise ReplicationError("replicator already started")
        if self._status_port is not None:
            try:
                self._status = StatusServer(
                    self.registry, self.health, host=self.config.status_host, port=self._status_port
                )
            except OSError as exc:
                raise PortInUseError(
                    f"status endpoint: cannot listen on {self.config.status_host}:{self._status_port}: {exc.strerror}"
                ) from None
        for flow in self.flows:
            runner = FlowRunner(self.config, flow, replicator_id=self.replicator_id, policy=self.policy)
            running = _Running(runner, threading.Thread())
            running.thread = threading.Thread(
                target=self._run_one, args=(running, until_caught_up), name=f"flow-{flow.name}", daemon=True
            )
            self._running.append(running)
            running.thread.start()

    def _run_one(self, running: _Running, until_caught_up: bool) -> None:
        try:
            running.runner.run(self._stop, until_caught_up=until_caught_up)
        except BaseException as exc:  # reported by wait(); other flows are stopped too
            running.error = authorization_failure(self.config, running.runner.flow, exc) or self._named(running, exc)
            if not isinstance(running.error, MirrorlakeError):
                _log.exception("flow %s failed", running.runner.flow.name)
            self._stop.set()

    def _named(self, running: _Running, exc: BaseException) -> BaseException:
        runner = running.runner  # its clients may not exist yet: what they saw is asked only when needed
        return named_failure(runner.flow, self.config.replicator_id or "main", exc, lambda: runner.client_failure)

    def stop(self) -> None:
        """Ask every flow to finish: each drains, publishes its syncs and commits."""
        self._stop.set()

    def wait(self, timeout: float | None = None) -> dict[str, FlowStats]:
        """Join the flow threads; re-raise the first flow error. Closes the status endpoint at the end."""
        for running in self._running:
            running.thread.join(timeout)
        if not self.alive and self._status is not None:
            self._status.close()
            self._status = None
        if not self.alive:
            # a flow's parts hold one another (callbacks bound to the runner), so its librdkafka
            # clients (threads, sockets: about 60 descriptors a flow) would wait for the next cyclic
            # collection; a process that runs replicators one after another ran out of descriptors
            gc.collect()
        for running in self._running:
            if running.error is not None:
                raise running.error
        return {r.runner.flow.name: r.runner.stats for r in self._running}

    @property
    def status_port(self) -> int | None:
        return self._status.port if self._status else None

    def health(self) -> dict[str, object]:
        """Every flow's state, records, assigned partitions, error and what it waits for (a cluster that
        is down); status ok while all run and none waits, ``degraded`` otherwise."""
        flows = {
            r.runner.flow.name: {
                "state": r.runner.stats.state,
                "records": r.runner.stats.records,
                "assigned": [f"{t}[{p}]" for t, p in r.runner.stats.assigned],
                "lag": sum(r.runner.stats.lag.values()),
                "error": r.runner.stats.error,
                "state_tasks": "leading" if r.runner.leads_state_tasks else "standby",
                "state_task_errors": dict(r.runner.stats.task_errors),
                "waiting_for": waiting_for(r.runner.stats),
                "reading_paused": r.runner.stats.paused,
                "copy_path": r.runner.stats.copy_path,
            }
            for r in self._running
        }
        ok = bool(flows) and all(f["state"] in ("starting", "running") and not f["waiting_for"] for f in flows.values())
        return {"status": "ok" if ok else "degraded", "replicator_id": self.replicator_id, "flows": flows}

    def run_until_caught_up(self) -> dict[str, FlowStats]:
        self.start(until_caught_up=True)
        return self.wait()

    def flow_stats(self) -> dict[str, FlowStats]:
        """Each started flow's live counters (read-only: the flow threads write them)."""
        return {r.runner.flow.name: r.runner.stats for r in self._running}

    @property
    def alive(self) -> bool:
        return any(r.thread.is_alive() for r in self._running)


def named_failure(
    flow: FlowConfig, instance: str, exc: BaseException, client_failure: Callable[[], KafkaError | None]
) -> BaseException:
    """A fatal client error as the flow's ``ReplicationError``; for an exactly-once producer fenced,
    with its likeliest cause named (``instance``: the replicator id of its transactional id). Any
    other error as it is.

    ``client_failure()`` is what the flow's callbacks saw (``FlowRunner.client_failure``, a fatal error
    first). It stands in where ``exc`` lost its cause (one raised through a librdkafka callback
    arrives as ``SystemError: ... returned a result with an exception set``, CI of 2026-11-28) and
    where ``exc`` carries a purge: a fenced producer's purged messages come back flagged fatal, and
    the flow named "Local: Purged in queue" instead of the fencing (CI of 2026-12-04). The callbacks
    need not have seen the fencing yet when the flow dies of its purge (a later CI: librdkafka logged
    the fencing, the error callback had not run; the purge was not always flagged fatal): an
    exactly-once flow that dies of a purge is named with the same likeliest cause, since its
    producer purged what it could no longer commit."""
    err = fatal_client_error(exc)
    seen = client_failure() if (err is None and isinstance(exc, SystemError)) or _purged(err) else None
    behind_a_purge = _purged(err) and seen is not None
    if seen is not None:
        err = seen
    if err is None:
        return exc
    text = str(exc) if isinstance(exc, MirrorlakeError) else f"flow {flow.name}: a client failed: {err.str()}"
    if behind_a_purge and err.str() not in text:
        text += f" after {err.str()}"  # the failure that left the purge behind
    if flow.exactly_once and (err.code() in FATAL_CODES or _purged(err)):
        text += (
            f"; its transactional id {transactional_id(flow, instance)} was taken over (another process "
            "running this flow with the same replicator_id: give each its own, --replicator-id; or the "
            "target's transaction coordinator aborted the transaction): a restart resumes from the "
            "positions committed on the target"
        )
    failed = ReplicationError(text)
    failed.__cause__ = exc
    return failed


def _purged(err: KafkaError | None) -> bool:
    return err is not None and err.code() in PURGED_CODES
