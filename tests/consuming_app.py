"""An application consuming through a ``FailoverConsumer`` in a thread, for the tests of moves."""

from __future__ import annotations

import threading
import time

from confluent_kafka import KafkaException

from replicator.client.failover_consumer import FailoverConsumer
from replicator.config import MirrorlakeConfig
from replicator.errors import FailoverError
from replicator.failover import plan_failover


def checkpointed(config: MirrorlakeConfig, flow: str, group: str) -> bool:
    """Whether the running flow has checkpointed ``group`` yet (a plan names only such groups)."""
    try:
        plan_failover(config, flow, groups=group)
    except FailoverError as exc:
        assert "matches no group" in str(exc) or "no group has a checkpoint" in str(exc), exc
        return False
    return True


class App:
    """Consumes through ``FailoverConsumer``, slowly; keeps every key it read and on which cluster."""

    def __init__(self, consumer: FailoverConsumer, pause_s: float = 0.1) -> None:
        self.pause_s = pause_s  # after each batch of up to 5: 0.1 s is ~50 records/s
        self.consumer = consumer
        self.read: list[tuple[str, bytes]] = []
        self.error: BaseException | None = None
        self.hold, self.idle = threading.Event(), threading.Event()
        self.commit_errors: list[KafkaException] = []
        self.uncommitted: set[bytes] = set()  # read, and their commit failed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if self.hold.is_set():  # the application is busy elsewhere: it does not poll
                    self.idle.set()
                    time.sleep(0.05)
                    continue
                self.idle.clear()
                msgs = [m for m in self.consumer.consume(5, timeout=0.3) if m.error() is None]
                time.sleep(self.pause_s)  # a slow application: the moves find it mid-stream
                cluster = self.consumer.cluster
                self.read += [(cluster, m.key()) for m in msgs]
                if msgs:
                    try:
                        self.consumer.commit(asynchronous=False)  # processed: committed before the next batch
                    except KafkaException as exc:  # its cluster just died: the move's offsets will stand
                        self.commit_errors.append(exc)
                        self.uncommitted |= {m.key() for m in msgs}
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def keys(self) -> set[bytes]:
        return {k for _c, k in self.read}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self.consumer.close()
