"""Keeping a flow's RPO figures live while none of its replicators runs (``mirrorlake observe --follow``).

Watermarks (records and seconds not replicated, per partition) come from the replicators' state
tasks: when every replicator of a flow is down, nobody emits them, and the last figure before the
stop stays the newest one while the source keeps taking writes. That is exactly when an operator
reads RPO to decide on a failover. ``observe_round`` looks at each flow: while a replicator of it
runs (a ``started`` lifecycle event seen within ``stale_after_s``, or an active member of its
consumer group on the source), the replicator's own watermarks are the true ones and nothing is
emitted (an observer's figures, computed from the offset syncs, trail a live copy loop's); when none
runs, the flow's state tasks run once (``observe_once``) under the observer's own replicator id, so
the figures say who measured them. ``keep_observing`` repeats rounds until asked to stop.

A cluster that does not answer makes that flow's round an error, logged, and the next round tries
again: RPO cannot be measured without the source, and the dashboard then shows the last figure
with its age ("at least N, as of T").
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from replicator.config import MirrorlakeConfig
from replicator.errors import MirrorlakeError
from replicator.failover.api import STALE_AFTER_S, running_replicators
from replicator.failover.state import read_flow_state
from replicator.kafka.settings import default_replicator_id
from replicator.tasks.observe import observe_once

__all__ = ["Observed", "keep_observing", "observe_round", "observer_id"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Observed:
    """What one round did for a flow: ``observed`` (watermarks emitted), ``skipped`` (a replicator
    runs: ``detail`` says which) or ``failed`` (``detail``: why)."""

    flow: str
    outcome: str
    detail: str = ""


def observer_id(config: MirrorlakeConfig) -> str:
    """The replicator id an observer's events carry: the config's (or this host's) with ``.observer``."""
    return f"{config.replicator_id or default_replicator_id()}.observer"


def observe_round(
    config: MirrorlakeConfig, flows: list[str] | None = None, *, stale_after_s: float = STALE_AFTER_S
) -> list[Observed]:
    """One look at each selected flow: observe it if none of its replicators runs."""
    out = []
    for flow in config.selected_flows(flows):
        try:
            running = running_replicators(config, read_flow_state(config, flow.name), stale_after_s)
            if running:
                out.append(Observed(flow.name, "skipped", "; ".join(running)))
                continue
            errors = observe_once(config, [flow.name], replicator_id=observer_id(config))[flow.name]
        except MirrorlakeError as exc:
            out.append(Observed(flow.name, "failed", str(exc)))
            continue
        if errors:
            out.append(Observed(flow.name, "failed", "; ".join(f"{task}: {e}" for task, e in sorted(errors.items()))))
        else:
            out.append(Observed(flow.name, "observed"))
    return out


def keep_observing(
    config: MirrorlakeConfig,
    stop: threading.Event,
    flows: list[str] | None = None,
    *,
    interval_s: float = 10.0,
    stale_after_s: float = STALE_AFTER_S,
) -> int:
    """Rounds every ``interval_s`` until ``stop`` is set; returns how many rounds ran."""
    rounds = 0
    while not stop.is_set():
        for seen in observe_round(config, flows, stale_after_s=stale_after_s):
            if seen.outcome == "failed":
                _log.warning("observer: flow %s not observed: %s", seen.flow, seen.detail)
            elif seen.outcome == "observed":
                _log.info("observer: flow %s has no running replicator: watermarks emitted", seen.flow)
            else:
                _log.debug("observer: flow %s runs (%s)", seen.flow, seen.detail)
        rounds += 1
        stop.wait(interval_s)
    return rounds
