"""The flow's consumer group as its coordinator runs it: cooperative, sticky, with sessions.

Membership changes (a join, a clean leave, a session that expired) rebalance the group. A partition
moving from a live member is first revoked from it (a callback it serves at its next poll, after
which it commits and lets go) and only then assigned to its new owner: two members never own one
partition at once, and a partition has at most one revoke outstanding. A killed member keeps its
partitions until its session expires; they are then assigned to others with no revoke and no
commit, and a member that was only frozen learns it lost them (``lost``) at its next poll, then
joins again. Commits are refused from a member no longer in the group and while the coordinator is
away.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Callback", "Group"]

Member = tuple[int, int]  # (slot, incarnation)


@dataclass(frozen=True)
class Callback:
    """A rebalance callback waiting for a member's poll: ``assign``, ``revoke`` or ``lost``."""

    kind: str
    partitions: tuple[int, ...]


@dataclass
class Group:
    partitions: int
    members: list[Member] = field(default_factory=list)
    owner: dict[int, Member | None] = field(default_factory=dict)
    pending: dict[Member, list[Callback]] = field(default_factory=dict)
    revoking: set[int] = field(default_factory=set)  # partitions whose owner was asked to let go
    committed: dict[int, int] = field(default_factory=dict)
    coordinator_up: bool = True

    def __post_init__(self) -> None:
        self.owner = {p: None for p in range(self.partitions)}

    # -- membership ------------------------------------------------------------------------------
    def join(self, member: Member) -> None:
        if member not in self.members:
            self.members.append(member)
        self.pending.setdefault(member, [])
        self._rebalance()

    def leave(self, member: Member) -> None:
        """A clean leave: the member revoked its partitions itself (closing, no commit)."""
        if member in self.members:
            self._drop(member)
            self.pending.pop(member, None)
            self._rebalance()

    def expire(self, member: Member, alive: bool) -> None:
        """The member's session expired: its partitions go to others with no revoke; a member still
        alive (frozen) learns it at its next poll (and joins again then, as librdkafka does)."""
        if member not in self.members:
            return
        mine = self._drop(member)
        self.pending.pop(member, None)
        if alive:
            self.pending[member] = [Callback("lost", mine)]
        self._rebalance()

    def _drop(self, member: Member) -> tuple[int, ...]:
        self.members.remove(member)
        mine = tuple(p for p, owner in self.owner.items() if owner == member)
        for p in mine:
            self.owner[p] = None
            self.revoking.discard(p)
        return mine

    # -- callbacks -------------------------------------------------------------------------------
    def take_callbacks(self, member: Member) -> list[Callback]:
        out, self.pending[member] = self.pending.get(member, []), []
        return out

    def revoked(self, member: Member, partitions: tuple[int, ...]) -> None:
        """``member`` served a revoke: the partitions are free, and placed anew."""
        for p in partitions:
            if self.owner.get(p) == member:
                self.owner[p] = None
                self.revoking.discard(p)
        self._rebalance()

    # -- assignment ------------------------------------------------------------------------------
    def _rebalance(self) -> None:
        """Sticky targets: each member keeps what it owns up to its share, the rest to the least
        loaded; a partition whose target is another member is revoked first, then assigned."""
        if not self.members:
            return
        share = -(-self.partitions // len(self.members))
        target: dict[Member, list[int]] = {m: [] for m in self.members}
        free: list[int] = []
        for p in range(self.partitions):
            owner = self.owner[p]
            if owner in target and p not in self.revoking and len(target[owner]) < share:
                target[owner].append(p)
            else:
                free.append(p)
        for p in free:
            least = min(self.members, key=lambda m: (len(target[m]), self.members.index(m)))
            target[least].append(p)
        for member, mine in target.items():
            for p in mine:
                owner = self.owner[p]
                if owner is None:
                    self.owner[p] = member
                    self.pending[member].append(Callback("assign", (p,)))
                elif owner != member and p not in self.revoking:
                    self.revoking.add(p)
                    self.pending.setdefault(owner, []).append(Callback("revoke", (p,)))

    # -- commits ---------------------------------------------------------------------------------
    def commit(self, member: Member, offsets: dict[int, int]) -> bool:
        """Commit ``offsets`` for ``member``; False (nothing written) when refused."""
        if not self.coordinator_up or member not in self.members:
            return False
        self.committed.update(offsets)
        return True
