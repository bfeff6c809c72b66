"""The flow graph of a config: cycles, and whether the configured policy can break them.

Active/active (A->B, B->A) and longer rings (A->B->C->A) are cycles. The default policy breaks
them by name (a flow never mirrors a topic that came from its target); the identity policy
cannot, so a cycle under it needs the provenance header. A config that would loop is rejected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.errors import ConfigError

if TYPE_CHECKING:  # config sits below the client core: the policy is only a type here
    from replicator.client.policy import ReplicationPolicy

__all__ = ["find_cycle", "provenance_enabled", "check_loop_free"]


def find_cycle(flows: tuple[FlowConfig, ...] | list[FlowConfig]) -> list[str] | None:
    """One cycle of enabled flows as cluster aliases (``[A, B, A]``), or None."""
    edges: dict[str, list[str]] = {}
    for f in flows:
        if f.enabled:
            edges.setdefault(f.source, []).append(f.target)
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in edges.get(node, []):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def provenance_enabled(config: MirrorlakeConfig, policy: ReplicationPolicy) -> bool:
    """The configured value, or by default: on exactly when the policy cannot track sources."""
    if config.provenance_header is not None:
        return config.provenance_header
    return not policy.can_track_source()


def check_loop_free(config: MirrorlakeConfig, policy: ReplicationPolicy) -> None:
    """Raise ``ConfigError`` if the flows form a cycle that neither names nor headers can break."""
    cycle = find_cycle(config.flows)
    if cycle and not policy.can_track_source() and not provenance_enabled(config, policy):
        raise ConfigError(
            f"flows {' -> '.join(cycle)} form a cycle, and the {type(policy).__name__} cannot tell "
            "replicated topics by name: records would loop forever. Set provenance_header: true "
            "(or use the default replication policy)."
        )
