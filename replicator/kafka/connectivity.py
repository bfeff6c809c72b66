"""Is a Kafka cluster there? One metadata request, or a bounded retry of it.

A cluster counts as reachable when it answers a metadata request (``AdminClient.list_topics``):
that needs a working connection, working authentication and a broker that has joined its quorum.

Client configurations hold secrets (SASL passwords, SSL keys). Nothing here logs a configuration,
and error messages are scrubbed of every configuration value except ``bootstrap.servers``.
librdkafka's own log lines (one per refused connection while a broker starts) go to the
``replicator.kafka.connectivity.librdkafka`` logger at DEBUG instead of stderr.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from replicator.errors import AuthenticationFailedError, ClusterUnreachableError, ConfigError
from replicator.kafka.clients import new_admin
from replicator.kafka.errors import kafka_error_reason, scrub_values

__all__ = ["MetadataProbe", "answers_metadata", "kafka_error_reason", "refused_credentials", "wait_for_cluster"]

# what librdkafka reports when a broker refuses who we say we are (SASL) or our certificate (TLS)
_REFUSED_CREDENTIALS = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED})
# A broker that requires a client certificate (``ssl.client.auth=required``) and gets none, or one
# its trust store does not vouch for, ends the handshake with a TLS alert that librdkafka reports as
# a transport error; a broker certificate that ``ssl.ca.location`` does not vouch for is ``_SSL``.
_CERTIFICATE_ALERT = re.compile(
    r"alert (bad certificate|certificate required|unknown ca|certificate unknown|certificate expired"
    r"|certificate revoked|unsupported certificate|access denied)",
    re.IGNORECASE,
)

_log = logging.getLogger(__name__)
_rdkafka_log = logging.getLogger(f"{__name__}.librdkafka")

# A probe reconnects quickly so a broker that just came up is seen within a second, not after
# librdkafka's default 10 s reconnect backoff. A caller's own setting wins.
_PROBE_DEFAULTS = {"reconnect.backoff.max.ms": "1000"}


class _DebugLogger:
    """Receives librdkafka's log lines (``logger`` config) and demotes them to DEBUG."""

    def log(self, level: int, msg: str, *args: Any) -> None:
        _rdkafka_log.debug(msg, *args)


class MetadataProbe:
    """One AdminClient reused for repeated metadata requests against one cluster.

    Raises ``ConfigError`` at construction if librdkafka rejects the configuration (the message is
    scrubbed of secret values).
    """

    def __init__(self, client_config: Mapping[str, str]) -> None:
        self._config = dict(client_config)
        self.refused: KafkaError | None = None  # the cluster's last refusal of our credentials
        conf: dict[str, Any] = {
            **_PROBE_DEFAULTS,
            **self._config,
            "logger": _DebugLogger(),
            "error_cb": self._on_error,
        }
        self._admin = new_admin(conf)

    def _on_error(self, err: KafkaError) -> None:
        if refused_credentials(err):
            self.refused = err

    @property
    def principal(self) -> str:
        """Who the probe tried to be, in words (never a secret)."""
        if user := self._config.get("sasl.username"):
            return f"principal {user!r} ({self._config.get('sasl.mechanisms', 'SASL')})"
        if self._config.get("ssl.certificate.location") or self._config.get("ssl.keystore.location"):
            return "the client certificate"
        return "the client"

    @property
    def bootstrap(self) -> str:
        return self._config.get("bootstrap.servers", "<no bootstrap.servers>")

    def request(self, timeout_s: float) -> None:
        """Send one metadata request; raises ``KafkaException`` if no answer within ``timeout_s``."""
        try:
            self._admin.list_topics(timeout=max(timeout_s, 0.05))
        finally:
            self._admin.poll(0)  # serve the queued librdkafka log lines to _DebugLogger

    def redact(self, text: str) -> str:
        """``text`` with every configuration value other than the bootstrap list replaced by ***."""
        return scrub_values(text, self._config)


def refused_credentials(err: KafkaError) -> bool:
    """Whether ``err`` says the cluster refused the client's credentials (SASL) or certificate (TLS),
    or the client refused the cluster's certificate: neither gets better by waiting."""
    code = err.code()
    if code in _REFUSED_CREDENTIALS or code == KafkaError._SSL:
        return True
    return code == KafkaError._TRANSPORT and _CERTIFICATE_ALERT.search(err.str()) is not None


def answers_metadata(client_config: Mapping[str, str], *, timeout_s: float = 2.0) -> bool:
    """True if the cluster answers one metadata request within ``timeout_s`` (no retry)."""
    try:
        MetadataProbe(client_config).request(timeout_s)
    except KafkaException as exc:
        _log.debug("no metadata from %s: %s", client_config.get("bootstrap.servers"), kafka_error_reason(exc))
        return False
    return True


def wait_for_cluster(alias: str, client_config: dict[str, str], *, timeout_s: float = 30.0) -> None:
    """Return once cluster ``alias`` answers a metadata request; give up after about ``timeout_s``.

    Each attempt waits at most the time left (and at most 5 s), so the call returns within
    ``timeout_s`` plus a fraction of a second. Raises ``ClusterUnreachableError`` naming the alias,
    the bootstrap servers and librdkafka's last error; ``ConfigError`` if the configuration is invalid.
    """
    if "bootstrap.servers" not in client_config:
        raise ConfigError(f"cluster {alias}: client configuration has no bootstrap.servers")
    probe = MetadataProbe(client_config)
    deadline = time.monotonic() + timeout_s
    retrying = Retrying(
        stop=stop_after_delay(timeout_s),
        wait=wait_exponential(multiplier=0.1, max=1.0),
        retry=retry_if_exception_type(KafkaException),
        reraise=True,
    )
    try:
        for attempt in retrying:
            with attempt:
                try:
                    probe.request(min(5.0, deadline - time.monotonic()))
                except KafkaException:
                    _refused(alias, probe)  # credentials do not get better by waiting
                    raise
    except KafkaException as exc:
        _refused(alias, probe)
        reason = probe.redact(kafka_error_reason(exc))
        raise ClusterUnreachableError(
            f"cluster {alias} at {probe.bootstrap} did not answer a metadata request within {timeout_s:g} s: {reason}"
        ) from exc
    _log.debug("cluster %s at %s answers metadata requests", alias, probe.bootstrap)


def _refused(alias: str, probe: MetadataProbe) -> None:
    """Raise ``AuthenticationFailedError`` if the cluster refused the probe's credentials."""
    if probe.refused is None:
        return
    reason = probe.redact(probe.refused.str())
    if probe.refused.code() == KafkaError._SSL:  # our side: the broker's certificate is not trusted
        raise AuthenticationFailedError(
            f"cluster {alias} at {probe.bootstrap}: the TLS handshake failed, the client does not trust the "
            f"broker's certificate: {reason}; check ssl.ca.location (the CA that signed the broker's certificate)"
        )
    raise AuthenticationFailedError(
        f"cluster {alias} at {probe.bootstrap} refused the credentials of {probe.principal}: {reason}; "
        "check the cluster's client settings (sasl.username, sasl.password, or ssl.certificate.location and "
        "ssl.key.location: a certificate signed by a CA the cluster trusts)"
    )
