"""A flow's red/amber/green status and the reasons for it (pure: no Streamlit, no SQL).

The status answers the on-call question "is this flow replicating, and is it safe to fail over?"
from what the lakehouse knows, judged at a reference moment ``now_ms`` (the wall clock, or the
"as of" moment when travelling back):

* red: a replicator process reported an error after the flow's latest start
  (``flow_lifecycle``: lifecycle per process, so one process's clean stop never paints a running
  flow); source records were deleted before they were copied (lost for good); nothing was heard
  from the flow (no heartbeat, no sync) for ``stale_red_ms``; or the oldest un-replicated record
  is older than ``lag_red_ms``;
* amber: every process of the flow stopped; silence longer than ``stale_amber_ms``; records at
  risk older than ``lag_amber_ms``; copies deleted from the target after they were replicated
  (retention/deletion: a failover would not find them, counted in ``records_at_risk``); a failover
  now would lose replicated records for some group; or the target differs from the source in a way
  the flow does not expect (divergence rows with ``expected = false``);
* green otherwise; the reason then says what was checked.

Every threshold is a field of ``Thresholds``; reasons are short phrases a person can act on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from dashboards import fmt
from replicator.client.failover_cost import DELETED_ON_TARGET
from replicator.client.present_copies import COMPACTED_ON_TARGET

__all__ = ["Thresholds", "FlowHealth", "Status", "ProcessState", "flow_lifecycle", "flow_status"]

Level = Literal["green", "amber", "red"]


@dataclass(frozen=True)
class Thresholds:
    stale_amber_ms: int = 60_000
    stale_red_ms: int = 300_000
    lag_amber_ms: int = 30_000
    lag_red_ms: int = 300_000


@dataclass(frozen=True)
class FlowHealth:
    """What the lakehouse says about one flow; ``None`` means "never seen"."""

    flow: str
    last_heartbeat_ms: int | None = None
    last_sync_ms: int | None = None
    records_at_risk: int | None = None
    seconds_at_risk: float | None = None
    records_expired: int | None = None
    records_deleted_on_target: int | None = None  # copied, then deleted on the target (lost to a failover)
    records_compacted_on_target: int | None = None  # copied, then removed by compaction on the target (audited)
    lifecycle_state: str | None = None
    lifecycle_reason: str | None = None
    groups_losing_records: int = 0
    unexpected_divergences: int = 0


@dataclass(frozen=True)
class Status:
    level: Level
    reasons: tuple[str, ...] = field(default_factory=tuple)

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)


@dataclass(frozen=True)
class ProcessState:
    """One replicator process's latest lifecycle event (ids carry the process: one row per process ever run)."""

    replicator_id: str
    state: str  # started | stopped | error | stop_requested
    reason: str | None
    at_ms: int


def flow_lifecycle(processes: list[ProcessState]) -> tuple[str | None, str | None]:
    """The flow's lifecycle (state, reason) from each process's latest event.

    A flow runs while any process's latest word is ``started``: a process that stopped cleanly, or
    failed, before the latest start is history, not the flow's state (the demo's batch run stopped
    once; the flow it started kept running). An error after the latest start is the flow's
    (``error``, one of its processes just failed); with no process started, the latest stop is
    (``stopped``). A process killed without a word stays ``started``: the silence check sees it.
    """
    starts = [p.at_ms for p in processes if p.state == "started"]
    last_start = max(starts, default=None)
    errors = [p for p in processes if p.state == "error" and (last_start is None or p.at_ms > last_start)]
    if errors:
        latest = max(errors, key=lambda p: p.at_ms)
        return "error", latest.reason
    if starts:
        return "running", None
    stops = [p for p in processes if p.state in ("stopped", "stop_requested")]
    if stops:
        latest = max(stops, key=lambda p: p.at_ms)
        return "stopped", latest.reason
    return None, None


def _last_heard(health: FlowHealth) -> int | None:
    seen = [t for t in (health.last_heartbeat_ms, health.last_sync_ms) if t is not None]
    return max(seen) if seen else None


def flow_status(health: FlowHealth, now_ms: int, thresholds: Thresholds = Thresholds()) -> Status:
    """The worst level any check reaches, with the reason of every check at that level."""
    red: list[str] = []
    amber: list[str] = []
    if health.lifecycle_state == "error":
        red.append(f"replicator error: {health.lifecycle_reason or 'no reason given'}")
    elif health.lifecycle_state == "stopped":
        amber.append(f"replicator stopped{f' ({health.lifecycle_reason})' if health.lifecycle_reason else ''}")
    if health.records_expired:
        red.append(f"{fmt.count(health.records_expired, 'record')} deleted on the source before they were copied")
    heard = _last_heard(health)
    if heard is None:
        red.append("no heartbeat or offset sync seen yet")
    else:
        silence = now_ms - heard
        if silence > thresholds.stale_red_ms:
            red.append(f"silent for {fmt.duration_ms(silence)} (last heartbeat/sync)")
        elif silence > thresholds.stale_amber_ms:
            amber.append(f"silent for {fmt.duration_ms(silence)} (last heartbeat/sync)")
    if health.seconds_at_risk is not None:
        lag_ms = health.seconds_at_risk * 1000
        if lag_ms > thresholds.lag_red_ms:
            red.append(f"oldest un-replicated record is {fmt.duration_ms(lag_ms)} old")
        elif lag_ms > thresholds.lag_amber_ms:
            amber.append(f"oldest un-replicated record is {fmt.duration_ms(lag_ms)} old")
    if health.records_deleted_on_target:
        amber.append(
            f"{fmt.count(health.records_deleted_on_target, 'record')} {DELETED_ON_TARGET} after they were copied: "
            "a failover would not find them"
        )
    if health.records_compacted_on_target:
        amber.append(
            f"{fmt.count(health.records_compacted_on_target, 'record')} {COMPACTED_ON_TARGET} after they were "
            "copied: a failover would not find them (exact per group: mirrorlake failover plan)"
        )
    if health.groups_losing_records:
        amber.append(f"{fmt.count(health.groups_losing_records, 'group')} would lose records on a failover now")
    if health.unexpected_divergences:
        amber.append(f"{fmt.count(health.unexpected_divergences, 'unexpected divergence')} from the source")
    if red:
        return Status("red", tuple(red))
    if amber:
        return Status("amber", tuple(amber))
    at_risk = fmt.count(health.records_at_risk or 0, "record")
    return Status("green", (f"replicating: {at_risk} at risk, last heard {fmt.ago(heard, now_ms)}",))
