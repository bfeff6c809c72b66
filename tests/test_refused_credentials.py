"""Which librdkafka errors say the credentials or certificates were refused (pure: errors built here).

librdkafka reports a broker's TLS alert about the client certificate as a transport error; only the
alert's words tell it from a broker that is merely down, which a probe should wait for.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from replicator.kafka.connectivity import refused_credentials

ALERT = "ssl://127.0.0.1:25704/bootstrap: Receive failed: error:0A000412:SSL routines::ssl/tls alert {} (after 0ms)"


@pytest.mark.parametrize("alert", ["bad certificate", "certificate required", "unknown ca", "certificate expired"])
def test_a_tls_alert_about_the_client_certificate_is_a_refusal(alert: str) -> None:
    assert refused_credentials(KafkaError(KafkaError._TRANSPORT, ALERT.format(alert)))


@pytest.mark.parametrize(
    "code",
    [KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._SSL],
)
def test_authentication_and_handshake_errors_are_refusals(code: int) -> None:
    assert refused_credentials(KafkaError(code, "refused"))


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (KafkaError._TRANSPORT, "127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection refused"),
        (KafkaError._TRANSPORT, ALERT.format("handshake failure").replace("handshake failure", "internal error")),
        (KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"),
        (KafkaError._TIMED_OUT, "certificate required"),  # the words alone, on another error, are not a refusal
    ],
)
def test_a_broker_that_is_down_is_not_a_refusal(code: int, text: str) -> None:
    assert not refused_credentials(KafkaError(code, text))
