"""How a flow's fatal client error is named (``replicator.flow.runtime.named_failure``): pure logic.

CI of 2026-12-04: a fenced exactly-once flow's purged state events came back flagged fatal, and
the flow failed naming "Local: Purged in queue" instead of its transactional id taken over. What the
flow's callbacks saw (the fencing) now stands in for a purge the exception carries.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from replicator.config import parse_config
from replicator.errors import ReplicationError
from replicator.flow.runtime import named_failure
from replicator.kafka.settings import transactional_id

FENCED = KafkaError(KafkaError._FENCED, "Local: This instance has been fenced by a newer instance", fatal=True)
PURGED = KafkaError(KafkaError._PURGE_QUEUE, "Local: Purged in queue", fatal=True)


def _flow(exactly_once: bool = True):  # noqa: ANN202 - FlowConfig
    config = parse_config(
        {
            "clusters": {"A": {"bootstrap_servers": "127.0.0.1:1"}, "B": {"bootstrap_servers": "127.0.0.1:2"}},
            "flows": [{"source": "A", "target": "B", "topics": ["orders"], "exactly_once": exactly_once}],
        },
        source="test",
    )
    return config.flow("A->B")


def _never_asked() -> KafkaError | None:
    raise AssertionError("what the callbacks saw was asked for where it is not needed (the clients may not exist)")


def _write_failed(err: KafkaError) -> ReplicationError:
    try:
        raise ReplicationError(f"flow A->B: write to B failed: {err.str()}") from KafkaException(err)
    except ReplicationError as exc:
        return exc


def test_a_purge_behind_a_fencing_names_the_fencing_and_the_transactional_id() -> None:
    flow = _flow()
    named = named_failure(flow, "main", _write_failed(PURGED), lambda: FENCED)
    said = str(named)
    assert isinstance(named, ReplicationError)
    assert said.startswith("flow A->B: write to B failed: Local: Purged in queue after ")
    assert "fenced by a newer instance" in said
    assert f"transactional id {transactional_id(flow, 'main')} was taken over" in said


def test_a_purge_with_nothing_behind_it_is_named_as_it_is() -> None:
    exc = _write_failed(PURGED)
    said = str(named_failure(_flow(exactly_once=False), "main", exc, lambda: None))
    assert said == "flow A->B: write to B failed: Local: Purged in queue"


PLAIN_PURGE = KafkaError(KafkaError._PURGE_QUEUE, "Local: Purged in queue")


@pytest.mark.parametrize("seen", [None, PLAIN_PURGE])
def test_an_exactly_once_purge_names_the_likeliest_cause_before_the_callbacks_do(seen) -> None:
    """CI of the 2026-12-07 session, twice: librdkafka logged the fencing, but the flow died of the
    purge (its state events' reports) before the error callback ran, so nothing better had been seen."""
    flow = _flow()
    said = str(named_failure(flow, "main", _write_failed(PURGED), lambda: seen))
    assert said.startswith("flow A->B: write to B failed: Local: Purged in queue")
    assert f"transactional id {transactional_id(flow, 'main')} was taken over" in said


def test_an_exception_that_lost_its_cause_behind_a_plain_purge_names_the_likeliest_cause() -> None:
    lost = SystemError("<cimpl.Producer object> returned NULL without setting an exception")
    said = str(named_failure(_flow(), "main", lost, lambda: PLAIN_PURGE))
    assert said.startswith("flow A->B: a client failed: Local: Purged in queue") and "was taken over" in said


def test_the_fencing_itself_is_named_with_its_transactional_id() -> None:
    said = str(named_failure(_flow(), "r1", _write_failed(FENCED), _never_asked))
    assert "after" not in said and "fenced by a newer instance" in said and "was taken over" in said


@pytest.mark.parametrize("exactly_once", [True, False])
def test_an_exception_that_lost_its_cause_takes_what_the_callbacks_saw(exactly_once: bool) -> None:
    lost = SystemError("<cimpl.Producer object> returned NULL without setting an exception")
    said = str(named_failure(_flow(exactly_once), "main", lost, lambda: FENCED))
    assert said.startswith("flow A->B: a client failed: Local: This instance has been fenced")
    assert ("was taken over" in said) is exactly_once


def test_an_error_that_is_no_client_failure_stays_as_it_is() -> None:
    error = ValueError("not Kafka's")
    assert named_failure(_flow(), "main", error, _never_asked) is error  # a flow whose clients may not exist yet
