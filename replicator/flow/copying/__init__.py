"""How a flow's records reach the target: one ``Copier`` contract, two produce paths.

``PythonCopier`` (``copier.py``) produces through confluent-kafka's ``Producer``; ``NativeCopier``
(``native_copier.py``) through the compiled ``_copycore`` (loaded by ``copycore.py``), which also
serves as the flow's data producer. Both pace their batches with ``batching.py`` and are held back
by ``backpressure.py`` while the target is down or slow. The runner sees only ``Copier``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from confluent_kafka import KafkaError, Message, Producer

if TYPE_CHECKING:
    from replicator.flow.core.sync_ledger import SyncLedger
    from replicator.metadata.topics import RemoteTopic

__all__ = ["Copier"]

TP = tuple[str, int]


class Copier(Protocol):
    """Copies consumed batches and reports each acknowledged copy to the sync ledger.

    ``connect`` wires it to the flow's clients once they exist; ``copy_batch`` produces a batch;
    ``delivery_error`` holds the first failed write (the runner raises it), ``transaction_failed``
    what said the target's open transaction failed (exactly-once: the runner aborts it); ``in_flight`` counts
    records produced and not yet acknowledged, ``oldest_in_flight`` the oldest source offset of
    each partition among them (what an exact read position must stay behind); ``forget`` drops
    partitions (revoked, or a re-created topic's) after handing over what was delivered.
    """

    delivery_error: KafkaError | None
    transaction_failed: KafkaError | None

    @property
    def in_flight(self) -> int: ...

    def connect(
        self,
        producer: Producer,
        ledger: SyncLedger,
        remote_for: Callable[[str, int], RemoteTopic],
        consumer_error: Callable[[KafkaError], None],
        consumed: Callable[[TP, int], None] | None = None,
    ) -> None: ...

    def copy_batch(self, messages: list[Message]) -> None: ...

    def oldest_in_flight(self) -> dict[TP, int]: ...

    def forget(self, partitions: set[TP]) -> None: ...

    def close(self) -> None: ...
