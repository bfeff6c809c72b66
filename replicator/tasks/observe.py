"""Observing a flow without copying: its state tasks run once, on whatever is on both clusters.

Useful when the replicator is stopped (what did it leave behind?), after an incident (has the
target diverged?), or for a pair replicated by someone else (MirrorMaker 2): watermarks, config
snapshots, audit windows and checkpoints are emitted to the target's state topic exactly as a
running flow would emit them, from the flow's topic selection and the mapping already in the log.
Remote topics are named by the replication policy; nothing is created but the state topic itself
on a target that has none yet (the first flow into a cluster may be observed before it ever ran),
nothing is written to the data topics nor to MM2's internal topics (an MM2 may own them), no group
offsets are changed (group sync is left to a running flow). Events the state topic did not take
are a flow error (``state``), never dropped in silence.
"""

from __future__ import annotations

import logging
from functools import partial

from replicator.client.policy import policy_from_config
from replicator.config import MirrorlakeConfig
from replicator.kafka.admin import admin_client, partition_counts
from replicator.kafka.connectivity import wait_for_cluster
from replicator.kafka.settings import default_replicator_id
from replicator.metadata.topics import TopicManager, flow_topic_selector
from replicator.tasks.flow_tasks import flow_state_tasks

__all__ = ["observe_once"]

_log = logging.getLogger(__name__)


def observe_once(
    config: MirrorlakeConfig, flows: list[str] | None = None, *, replicator_id: str | None = None
) -> dict[str, dict[str, str]]:
    """Run every state task of each flow once; returns each flow's task errors (empty: all ran).
    ``replicator_id``: who the events say emitted them (default: the config's, as a replicator's)."""
    policy = policy_from_config(config.replication_policy)
    selected = config.selected_flows(flows)
    replicator_id = replicator_id or config.replicator_id or default_replicator_id()
    errors: dict[str, dict[str, str]] = {}
    for flow in selected:
        for alias in (flow.source, flow.target):
            wait_for_cluster(alias, config.cluster(alias).client_config(), timeout_s=config.connect_timeout_seconds)
        flow = flow.model_copy(
            update={"sync_group_offsets": False, "emit_mm2_checkpoints": False, "emit_mm2_offset_syncs": False}
        )
        selector = flow_topic_selector(config, flow, policy)  # the replicator's own: heartbeats too
        source_admin = admin_client(config.cluster(flow.source).client_config())
        target_admin = admin_client(config.cluster(flow.target).client_config())
        TopicManager(target_admin, target_admin).ensure_state_topic(config.state_topic)
        remote = selector.select(partition_counts(source_admin))
        tasks = flow_state_tasks(
            config,
            flow,
            replicator_id=replicator_id,
            policy=policy,
            remote_topics=partial(dict, remote),
            assigned=lambda: [],
            continuous=False,
        )
        tasks.stop(final_round=True, force=True)
        errors[flow.name] = dict(tasks.errors)
        if tasks.ctx.state.failed is not None:
            errors[flow.name]["state"] = f"events not written to {config.state_topic}: {tasks.ctx.state.failed}"
        _log.info(
            "flow %s observed: %d topics%s", flow.name, len(remote), f", errors: {tasks.errors}" if tasks.errors else ""
        )
    return errors
