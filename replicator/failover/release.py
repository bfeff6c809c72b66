"""Ask a move's consumers to leave first: ``failover apply`` / ``failback apply --groups`` with
``--move-consumers``.

A group moved while its members still consume reads on after the offsets the move translated: the
records between are read twice once the members continue on the other cluster. So, before reading
a group's committed offsets, the move writes a ``consumer_release`` event to the flow's target state
topic (where ``failover`` and ``failback`` events go, and which a ``FailoverConsumer`` follows);
each ``replicator.client.FailoverConsumer`` of the groups on that cluster commits what it consumed
and leaves the group, and the move waits until the groups have no members there. A member that is
not a ``FailoverConsumer`` never leaves: the move then stops with an error naming the group and
how many members stay. A cluster that does not answer (the source in a disaster) has nobody to
wait for: its consumers cannot read on either.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Sequence

from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.errors import FailoverError
from replicator.events import ConsumerRelease
from replicator.failover.target import group_activity
from replicator.kafka.admin import admin_client
from replicator.kafka.connectivity import answers_metadata
from replicator.kafka.state_log import StateLog
from replicator.tasks.base import task_producer

__all__ = ["release_consumers"]

_log = logging.getLogger(__name__)
_FLUSH_S = 30.0


def release_consumers(
    config: MirrorlakeConfig,
    flow: FlowConfig,
    groups: Sequence[str],
    *,
    cluster: str,
    reason: str,
    user: str,
    timeout_s: float,
) -> ConsumerRelease:
    """Write the ``consumer_release`` event, then wait up to ``timeout_s`` until none of ``groups``
    has a member on ``cluster``; ``FailoverError`` naming those that still have."""
    replicator_id = f"{reason}@{socket.gethostname()}-{os.getpid()}"
    event = ConsumerRelease(
        flow=flow.name,
        replicator_id=replicator_id,
        source_cluster=flow.source,
        target_cluster=flow.target,
        cluster=cluster,
        groups=tuple(groups),
        reason=reason,
        host=socket.gethostname(),
        user=user,
    )
    log = StateLog(task_producer(config.cluster(flow.target).client_config(), replicator_id), config.state_topic)
    log.emit(event)
    if not log.flushed(_FLUSH_S):
        raise FailoverError(f"could not write the consumer_release event to {config.state_topic} on {flow.target}")
    conf = config.cluster(cluster).client_config()
    if not answers_metadata(conf, timeout_s=3.0):
        _log.warning("%s does not answer: no consumer of %s there to wait for", cluster, ", ".join(groups))
        return event
    admin = admin_client(conf)
    deadline = time.monotonic() + timeout_s
    while True:
        activity = group_activity(admin, list(groups))
        staying = {g: a.members for g, a in activity.items() if a.active}
        if not staying:
            _log.info("the consumers of %s left %s", ", ".join(groups), cluster)
            return event
        if time.monotonic() >= deadline:
            named = ", ".join(f"{g} ({n} member(s))" for g, n in sorted(staying.items()))
            raise FailoverError(
                f"consumers still in group(s) on {cluster} after {timeout_s:.0f} s: {named}; only a "
                "FailoverConsumer leaves when asked: stop the others, then run the command again"
            )
        time.sleep(0.5)  # an operation waiting on the cluster's consumers, not a test
