"""MirrorMaker 2's dedicated-mode ``connect-mirror-maker.properties``, translated to a mirrorlake config.

The file is read as ``java.util.Properties.load(InputStream)`` reads it (ISO-8859-1, ``\\uXXXX`` for
anything else) and its keys are understood as ``MirrorMakerConfig`` understands them:

- ``clusters = A, B``; ``A.bootstrap.servers`` (top-level ``bootstrap.servers`` is every cluster's default).
- Client security settings (``security.protocol``, ``ssl.*``, ``sasl.*``) at top level (a default for
  every cluster), as ``A.<key>`` and as ``A.producer|consumer|admin.<key>`` become ``clusters.A.client``
  with Java names turned into librdkafka's (``sasl.mechanism`` -> ``sasl.mechanisms``, a PLAIN/SCRAM
  ``sasl.jaas.config`` -> ``sasl.username``/``sasl.password``, a PEM trust store -> ``ssl.ca.location``,
  ...). mirrorlake has one client configuration per cluster for its consumer, producer and admin
  client, so the values given for one key at these levels must agree. A Java setting librdkafka cannot
  use (a JKS trust store, an OAuth login module, a callback handler class) is an error naming the key
  and, where there is one, the librdkafka setting to add; librdkafka's own names (``A.ssl.ca.location``,
  ...) are accepted because MM2 ignores them, so one file can serve both. Role tuning
  (``A.producer.linger.ms``) and worker settings (``A.offset.storage.topic``) are accepted, not used:
  the flow sets its own client tuning.
- A flow ``S->T`` exists when any ``S->T.<key>`` is set (or a top-level ``enabled = true`` enables every
  pair, as in MM2). Connector settings are top-level defaults that ``S->T.<key>`` overrides:
  ``enabled`` (MM2's default: false), ``topics``, ``topics.exclude`` (or the deprecated
  ``topics.blacklist``; an explicit list replaces the default list, as in MM2), ``offset.lag.max`` and
  ``replication.policy.class``/``.separator`` (one policy for all enabled flows), ``groups``,
  ``groups.exclude``, ``emit.checkpoints.enabled``/``.interval.seconds`` (state events and MM2's
  checkpoints topic alike), ``sync.group.offsets.enabled``, ``emit.heartbeats.enabled``/``.interval.seconds``
  and ``emit.offset-syncs.enabled`` (MM2's offset-syncs topic, written only when set to true).
- Every other MM2 key (topic config/ACL sync, replication factors,
  ``tasks.max``, worker, REST, ...) is accepted and logged once at WARNING as "accepted, not used yet".
  Settings whose silent omission would change what is copied or how a cluster is reached (a custom
  ``topic.filter.class``, ``transforms``, ``config.providers``, a Java replication policy class other
  than MM2's two) are errors. Any other key is an error naming it ("Unrecognized properties: ...").

Values never appear in errors or logs for keys that may hold secrets; only key names do.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from replicator.config.java_properties import CHAR_ESCAPES, JAVA_TRIM, parse_properties
from replicator.config.model import MirrorlakeConfig, parse_config
from replicator.config.patterns import UnsupportedPatternError, compile_pattern
from replicator.errors import ConfigError

__all__ = ["parse_properties", "mm2_to_config_dict", "load_mm2_properties"]  # parse_properties re-exported

_log = logging.getLogger(__name__)
T = TypeVar("T")


# -- MM2's keys --------------------------------------------------------------------------------
def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Java client security settings (security.protocol, SslConfigs/SaslConfigs client support) and
# librdkafka's own names for them: valid at top level, as ``A.<name>`` and ``A.producer|consumer|admin.<name>``.
_JAVA_SAME = _names(  # the same name and meaning in librdkafka
    """security.protocol ssl.key.password sasl.kerberos.service.name sasl.kerberos.kinit.cmd
    sasl.kerberos.min.time.before.relogin sasl.oauthbearer.token.endpoint.url"""
)
_JAVA_TRANSLATED = _names(  # see _Translation._client
    """sasl.mechanism sasl.jaas.config sasl.login.callback.handler.class ssl.endpoint.identification.algorithm
    ssl.truststore.location ssl.truststore.type ssl.truststore.password ssl.truststore.certificates
    ssl.keystore.location ssl.keystore.type ssl.keystore.password ssl.keystore.key
    ssl.keystore.certificate.chain"""
)
_JAVA_UNUSED = _names(  # no librdkafka equivalent; librdkafka's defaults do the job
    """ssl.protocol ssl.provider ssl.cipher.suites ssl.enabled.protocols ssl.keymanager.algorithm
    ssl.trustmanager.algorithm ssl.secure.random.implementation sasl.kerberos.ticket.renew.window.factor
    sasl.kerberos.ticket.renew.jitter sasl.login.refresh.window.factor sasl.login.refresh.window.jitter
    sasl.login.refresh.min.period.seconds sasl.login.refresh.buffer.seconds sasl.login.connect.timeout.ms
    sasl.login.read.timeout.ms sasl.login.retry.backoff.ms sasl.login.retry.backoff.max.ms
    sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name sasl.oauthbearer.jwks.endpoint.url
    sasl.oauthbearer.jwks.endpoint.refresh.ms sasl.oauthbearer.jwks.endpoint.retry.backoff.ms
    sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms sasl.oauthbearer.clock.skew.seconds
    sasl.oauthbearer.expected.audience sasl.oauthbearer.expected.issuer sasl.oauthbearer.header.urlencode"""
)
_JAVA_UNSUPPORTED = {  # Java plug-ins librdkafka cannot load
    "sasl.client.callback.handler.class": "librdkafka has no SASL callback handlers",
    "sasl.login.class": "librdkafka has no SASL login classes",
    "ssl.engine.factory.class": "librdkafka uses OpenSSL, not a Java SSL engine factory",
}
_NATIVE = _names(  # librdkafka's names: MM2 ignores them, so one file can serve both
    """sasl.mechanisms sasl.username sasl.password sasl.kerberos.principal sasl.kerberos.keytab
    sasl.oauthbearer.method sasl.oauthbearer.client.id sasl.oauthbearer.client.secret sasl.oauthbearer.scope
    sasl.oauthbearer.extensions sasl.oauthbearer.config ssl.ca.location ssl.ca.pem ssl.certificate.location
    ssl.certificate.pem ssl.key.location ssl.key.pem ssl.crl.location enable.ssl.certificate.verification"""
)
_SECURITY = _JAVA_SAME | _JAVA_TRANSLATED | _JAVA_UNUSED | _JAVA_UNSUPPORTED.keys() | _NATIVE

# Connector settings (ConnectorConfig, MirrorConnectorConfig, MirrorSourceConfig, MirrorCheckpointConfig,
# MirrorHeartbeatConfig): top-level defaults that ``S->T.<name>`` overrides. Mapped: enabled, topics,
# topics.exclude, topics.blacklist, offset.lag.max, replication.policy.class, replication.policy.separator.
_CONNECTOR = _SECURITY | _names(
    """enabled topics topics.exclude topics.blacklist offset.lag.max replication.policy.class
    replication.policy.separator topic.filter.class transforms
    name connector.class tasks.max tasks.max.enforce key.converter value.converter header.converter
    config.action.reload predicates errors.retry.timeout errors.retry.delay.max.ms errors.tolerance
    errors.log.enable errors.log.include.messages source.cluster.alias target.cluster.alias admin.timeout.ms
    forwarding.admin.class replication.policy.internal.topic.separator.enabled metric.reporters
    offset-syncs.topic.location emit.offset-syncs.enabled offset-syncs.topic.replication.factor
    config.properties.exclude config.properties.blacklist config.property.filter.class consumer.poll.timeout.ms
    refresh.topics.enabled refresh.topics.interval.seconds sync.topic.configs.enabled
    sync.topic.configs.interval.seconds use.incremental.alter.configs sync.topic.acls.enabled
    sync.topic.acls.interval.seconds replication.factor add.source.alias.to.metrics groups groups.exclude
    groups.blacklist group.filter.class refresh.groups.enabled refresh.groups.interval.seconds
    emit.checkpoints.enabled emit.checkpoints.interval.seconds sync.group.offsets.enabled
    sync.group.offsets.interval.seconds checkpoints.topic.replication.factor emit.heartbeats.enabled
    emit.heartbeats.interval.seconds heartbeats.topic.replication.factor metric.names.formats"""
)
_ONLY_DEFAULT = {  # name -> (the one value mirrorlake honours, why): ignoring others would change the copy
    "topic.filter.class": (
        "org.apache.kafka.connect.mirror.DefaultTopicFilter",
        "a custom topic filter; mirrorlake selects topics with topics and topics.exclude",
    ),
    "transforms": ("", "Connect transformations; mirrorlake copies records unchanged"),
    "config.providers": ("", "${provider:path:key} substitution; write the values themselves"),
}
# MM2 flow keys and the FlowConfig fields each one sets. MM2's checkpoints are both the state
# events and the records in <source>.checkpoints.internal; an explicit emit.offset-syncs.enabled
# (MM2's default is true) asks for MM2's offset-syncs topic beside mirrorlake's own syncs.
_FLOW_BOOLS = {
    "emit.checkpoints.enabled": ("emit_checkpoints", "emit_mm2_checkpoints"),
    "sync.group.offsets.enabled": ("sync_group_offsets",),
    "emit.heartbeats.enabled": ("emit_heartbeats",),
    "emit.offset-syncs.enabled": ("emit_mm2_offset_syncs",),
}
_FLOW_SECONDS = {
    "emit.checkpoints.interval.seconds": "emit_checkpoints_interval_seconds",
    "emit.heartbeats.interval.seconds": "emit_heartbeats_interval_seconds",
}
_FLOW_PREFIXES = ("producer.", "consumer.", "admin.", "source.", "target.", "transforms.", "predicates.")

# Connect worker settings (WorkerConfig, DistributedConfig, RestServerConfig), valid as ``A.<name>``.
_WORKER = _names(
    """group.id client.id client.dns.lookup key.converter value.converter header.converter
    task.shutdown.graceful.timeout.ms offset.flush.interval.ms offset.flush.timeout.ms plugin.path
    plugin.discovery connector.client.config.override.policy metrics.sample.window.ms metrics.num.samples
    metrics.recording.level metric.reporters auto.include.jmx.reporter topic.tracking.enable
    topic.tracking.allow.reset topic.creation.enable listeners admin.listeners rest.advertised.host.name
    rest.advertised.port rest.advertised.listener rest.extension.classes response.http.headers.config
    access.control.allow.origin access.control.allow.methods session.timeout.ms heartbeat.interval.ms
    rebalance.timeout.ms worker.sync.timeout.ms worker.unsync.backoff.ms connect.protocol
    scheduled.rebalance.max.delay.ms exactly.once.source.support metadata.max.age.ms metadata.recovery.strategy
    request.timeout.ms send.buffer.bytes receive.buffer.bytes reconnect.backoff.ms reconnect.backoff.max.ms
    retry.backoff.ms retry.backoff.max.ms socket.connection.setup.timeout.ms
    socket.connection.setup.timeout.max.ms connections.max.idle.ms"""
)
_ROLES = ("producer.", "consumer.", "admin.")
_WORKER_PREFIXES = _ROLES + (
    "offset.storage.",
    "config.storage.",
    "status.storage.",
    "key.converter.",
    "value.converter.",
    "header.converter.",
    "inter.worker.",
    "listeners.",
    "admin.listeners.",
    "rest.",
    "metrics.context.",
)

# MirrorMakerConfig's own keys, and the prefixes its workerConfig() takes from the top level.
_TOP_LEVEL = _names(
    """clusters bootstrap.servers config.providers dedicated.mode.enable.internal.rest listeners admin.listeners
    rest.advertised.host.name rest.advertised.port rest.advertised.listener"""
)
_TOP_LEVEL_PREFIXES = _ROLES + (
    "offset.storage",
    "config.storage",
    "status.storage",
    "key.converter",
    "value.converter",
    "header.converter",
    "task",
    "worker",
    "replication.policy",
    "config.providers.",
    "rest.",
    "listeners.",
    "admin.listeners.",
)

_POLICIES = {
    "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": "default",
    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": "identity",
}
_FLOW_KEY = re.compile(r"(?P<source>[^.]+?)->(?P<target>[^.]+?)\.(?P<name>.+)", re.S)
_JAVA_LIST_SEP = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")
_JAAS_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([=;])|([^\s=;"]+))', re.S)
_JAAS_USER_PASSWORD = (
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
)
_JAAS_KERBEROS = "com.sun.security.auth.module.Krb5LoginModule"


def _trim(value: str) -> str:
    return value.strip(JAVA_TRIM)


def _java_list(value: str) -> list[str]:
    """ConfigDef's LIST: trimmed, split at commas and their blanks (empty items, matching no topic, dropped)."""
    return [item for item in _JAVA_LIST_SEP.split(_trim(value)) if item]


def _java_bool(value: str) -> bool:
    """ConfigDef's BOOLEAN (ValueError names the value: only for keys that hold no secret)."""
    lowered = _trim(value).lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"expected true or false (got {value!r})")
    return lowered == "true"


def _java_long(value: str) -> int:
    """ConfigDef's LONG (ValueError names the value: only for keys that hold no secret)."""
    if not re.fullmatch(r"[+-]?[0-9]+", _trim(value)):
        raise ValueError(f"expected a whole number (got {value!r})")
    return int(_trim(value))


def _jaas_options(value: str) -> tuple[str, dict[str, str]]:
    """``<LoginModule> <flag> name=value ...;`` -> (module, options); ValueError never quotes the value."""
    tokens: list[str | None] = []  # words; None for '=' and ';' is kept as the separator itself
    text, pos = _trim(value), 0
    while (match := _JAAS_TOKEN.match(text, pos)) is not None and match.end() > pos:
        quoted, sep, word = match.groups()
        if quoted is not None:
            tokens.append(re.sub(r"\\(.)", lambda m: CHAR_ESCAPES.get(m[1], m[1]), quoted))
        else:
            tokens.append(word if word is not None else "\0" + sep)
        pos = match.end()
    body = tokens[2:-1]
    if (
        text[pos:].strip()
        or len(tokens) < 3
        or tokens[-1] != "\0;"
        or len(body) % 3
        or any(body[i + 1] != "\0=" for i in range(0, len(body), 3))
    ):
        raise ValueError('expected one JAAS login module entry: <LoginModule> required name="value" ...;')
    return str(tokens[0]), {str(body[i]): str(body[i + 2]) for i in range(0, len(body), 3)}


class _Translation:
    """One pass over MM2 properties: classify every key, then build the config document.

    Every key is unknown (an error), used (it shaped the result) or accepted but not used.
    """

    def __init__(self, props: Mapping[str, str], source: str) -> None:
        self.props = props
        self.source = source
        self.used: set[str] = set()
        if "clusters" not in props:
            raise ConfigError(f"{source}: clusters is required (MM2's list of cluster aliases, e.g. clusters = A, B)")
        listed = _java_list(self.value("clusters"))
        self.aliases = list(dict.fromkeys(listed))
        if len(self.aliases) != len(listed):
            twice = sorted({a for a in listed if listed.count(a) > 1})
            raise ConfigError(f"{source}: clusters: alias {', '.join(map(repr, twice))} listed twice")
        for alias in self.aliases:
            if re.search(r"[\s.#]|->", alias):
                hint = " ('#' starts a comment only at the beginning of a line)" if "#" in alias else ""
                raise ConfigError(f"{source}: clusters: {alias!r} is not a cluster alias{hint}")
        self.top: dict[str, str] = {}  # name -> key, for top-level keys (name == key)
        self.cluster: dict[str, dict[str, str]] = {alias: {} for alias in self.aliases}  # alias -> name -> key
        self.flow: dict[tuple[str, str], dict[str, str]] = {}  # (source, target) -> name -> key
        self._classify()

    def value(self, key: str) -> str:
        self.used.add(key)
        return self.props[key]

    def fail(self, message: str) -> ConfigError:
        return ConfigError(f"{self.source}: {message}")

    def typed(self, key: str, convert: Callable[[str], T], *, use: bool = True) -> T:
        """``convert`` the value of ``key``; ``use`` marks it as shaping the result."""
        try:
            return convert(self.value(key) if use else self.props[key])
        except ValueError as exc:
            raise self.fail(f"{key}: {exc}") from None

    # -- which key is which --------------------------------------------------------------------
    def _classify(self) -> None:
        unknown: list[str] = []
        problems: list[str] = []
        for key in self.props:
            head, _, name = key.partition(".")
            if flow := _FLOW_KEY.fullmatch(key):
                pair = (flow["source"], flow["target"])
                strangers = [alias for alias in pair if alias not in self.aliases]
                if strangers:
                    problems.append(f"{key}: unknown cluster {strangers[0]!r} (clusters = {', '.join(self.aliases)})")
                elif pair[0] == pair[1]:
                    problems.append(f"{key}: source and target are both {pair[0]!r}")
                elif flow["name"] in _CONNECTOR or flow["name"].startswith(_FLOW_PREFIXES):
                    self.flow.setdefault(pair, {})[flow["name"]] = key
                else:
                    unknown.append(_hinted(key, flow["name"], _CONNECTOR))
            elif key in _CONNECTOR or key in _TOP_LEVEL or key.startswith(_TOP_LEVEL_PREFIXES):
                self.top[key] = key
            elif head in self.aliases and name:
                if (
                    name == "bootstrap.servers"
                    or name in _SECURITY
                    or name in _WORKER
                    or name.startswith(_WORKER_PREFIXES)
                ):
                    self.cluster[head][name] = key
                else:
                    unknown.append(_hinted(key, name, _SECURITY | _WORKER | {"bootstrap.servers"}))
            elif name == "bootstrap.servers" or name in _SECURITY:
                unknown.append(f"{key} ({head!r} is not in clusters = {', '.join(self.aliases)})")
            else:
                unknown.append(_hinted(key, key, _CONNECTOR | _TOP_LEVEL))
        if unknown:
            problems.insert(0, "Unrecognized properties: " + ", ".join(unknown))
        for name, (default, why) in _ONLY_DEFAULT.items():
            keys = [self.top.get(name)] + [names.get(name) for names in self.flow.values()]
            for key in filter(None, keys):
                if _trim(self.props[key]) != default:
                    problems.append(f"{key}: not supported ({why})")
        if problems:
            raise self.fail("invalid MirrorMaker 2 properties:\n  " + "\n  ".join(problems))

    # -- clusters --------------------------------------------------------------------------------
    def clusters(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for alias in self.aliases:
            key = self.cluster[alias].get("bootstrap.servers") or self.top.get("bootstrap.servers")
            if key is None:
                raise self.fail(f"{alias}.bootstrap.servers is required")
            out[alias] = {"bootstrap_servers": ",".join(_java_list(self.value(key))), "client": self._client(alias)}
        return out

    def _security(self, alias: str) -> dict[str, list[str]]:
        """Security name -> the keys that set it for ``alias``: ``A.x`` (else top-level ``x``) and ``A.<role>.x``."""
        names = self.cluster[alias]
        settings: dict[str, list[str]] = {}
        for name in _SECURITY:
            base = names.get(name) or self.top.get(name)
            keys = [k for k in [base, *(names.get(role + name) for role in _ROLES)] if k]
            if len({_trim(self.props[k]) for k in keys}) > 1:
                raise self.fail(
                    f"{', '.join(keys)} differ; mirrorlake has one client configuration per cluster "
                    "(for its consumer, producer and admin client), so give them one value"
                )
            if keys:
                settings[name] = keys
        return settings

    def _client(self, alias: str) -> dict[str, str]:
        keys = self._security(alias)

        def get(name: str) -> str:
            self.used.update(keys[name])
            return _trim(self.props[keys[name][0]])

        def replaced(java: str, *natives: str) -> bool:
            """Whether librdkafka's own setting is given instead (``java`` then stays unused)."""
            return java in keys and any(n in keys for n in natives)

        def missing(java: str, why: str, *natives: str) -> ConfigError:
            prefix = keys[java][0].removesuffix(java)
            add = " and ".join(prefix + n for n in natives)
            return self.fail(f"{keys[java][0]}: {why}; add {add} (MM2 ignores it, mirrorlake uses it)")

        for name, why in _JAVA_UNSUPPORTED.items():
            if name in keys:
                raise self.fail(f"{keys[name][0]}: not supported ({why})")
        client = {name: get(name) for name in sorted(keys) if name in _NATIVE or name in _JAVA_SAME}
        if "sasl.mechanism" in keys and not replaced("sasl.mechanism", "sasl.mechanisms"):
            client["sasl.mechanisms"] = get("sasl.mechanism")
        if "ssl.endpoint.identification.algorithm" in keys:
            algorithm = get("ssl.endpoint.identification.algorithm").lower()
            if algorithm not in ("", "https"):
                raise self.fail(f"{keys['ssl.endpoint.identification.algorithm'][0]}: expected https or nothing")
            client["ssl.endpoint.identification.algorithm"] = algorithm or "none"
        oauth = ("sasl.oauthbearer.method",)
        if "sasl.login.callback.handler.class" in keys and not replaced("sasl.login.callback.handler.class", *oauth):
            raise missing("sasl.login.callback.handler.class", "librdkafka has no login callback handlers", *oauth)
        if "sasl.jaas.config" in keys:
            module, options = self.typed(keys["sasl.jaas.config"][0], _jaas_options, use=False)
            if module in _JAAS_USER_PASSWORD and not replaced("sasl.jaas.config", "sasl.username"):
                if "username" not in options or "password" not in options:
                    raise self.fail(f"{keys['sasl.jaas.config'][0]}: {module} needs username and password options")
                get("sasl.jaas.config")
                client.update({"sasl.username": options["username"], "sasl.password": options["password"]})
            elif module == _JAAS_KERBEROS:
                for option, native in (("principal", "sasl.kerberos.principal"), ("keyTab", "sasl.kerberos.keytab")):
                    if option in options and native not in client:
                        get("sasl.jaas.config")
                        client[native] = options[option]
            elif module not in _JAAS_USER_PASSWORD and not replaced("sasl.jaas.config", *oauth):
                raise missing("sasl.jaas.config", f"librdkafka cannot use the login module {module}", *oauth)
        self._stores(keys, client, get, replaced, missing)
        return client

    def _stores(
        self, keys: dict[str, list[str]], client: dict[str, str], get: Any, replaced: Any, missing: Any
    ) -> None:
        """Java trust and key stores -> librdkafka's CA and certificate settings."""
        if "ssl.truststore.certificates" in keys and not replaced("ssl.truststore.certificates", "ssl.ca.pem"):
            client["ssl.ca.pem"] = get("ssl.truststore.certificates")
        elif "ssl.truststore.location" in keys and not replaced(
            "ssl.truststore.location", "ssl.ca.location", "ssl.ca.pem"
        ):
            trust_type = get("ssl.truststore.type").upper() if "ssl.truststore.type" in keys else "JKS"
            if trust_type != "PEM":
                why = f"librdkafka cannot read a {trust_type} trust store"
                raise missing("ssl.truststore.location", why, "ssl.ca.location")
            client["ssl.ca.location"] = get("ssl.truststore.location")
        certificate = ("ssl.certificate.location", "ssl.certificate.pem")
        if "ssl.keystore.location" in keys and not replaced("ssl.keystore.location", *certificate):
            key_type = get("ssl.keystore.type").upper() if "ssl.keystore.type" in keys else "JKS"
            if key_type == "PKCS12":  # librdkafka reads PKCS#12 key stores itself
                client["ssl.keystore.location"] = get("ssl.keystore.location")
                if "ssl.keystore.password" in keys:
                    client["ssl.keystore.password"] = get("ssl.keystore.password")
            elif key_type == "PEM":  # one PEM file holding the private key and the certificate chain
                client["ssl.certificate.location"] = client["ssl.key.location"] = get("ssl.keystore.location")
            else:
                why = f"librdkafka cannot read a {key_type} key store (a PKCS12 one both can read)"
                raise missing("ssl.keystore.location", why, "ssl.certificate.location", "ssl.key.location")
        for java, native in (
            ("ssl.keystore.certificate.chain", "ssl.certificate.pem"),
            ("ssl.keystore.key", "ssl.key.pem"),
        ):
            if java in keys and not replaced(java, native):
                client[native] = get(java)

    # -- flows and the policy ------------------------------------------------------------------
    def _merged(self, pair: tuple[str, str] | None) -> dict[str, str]:
        """Connector setting -> the key it comes from: top-level defaults, then ``S->T.<name>``."""
        merged = {name: key for name, key in self.top.items() if name in _CONNECTOR}
        merged.update(self.flow.get(pair, {}) if pair else {})
        return merged

    def _enabled(self, pair: tuple[str, str], merged: dict[str, str]) -> bool:
        if "enabled" not in merged or not self.typed(merged["enabled"], _java_bool):
            return False  # MM2: a flow is disabled unless enabled
        if "enabled" in self.flow.get(pair, {}):
            return True
        # a top-level enabled = true reaches only the pairs MM2 creates: those with heartbeats
        heartbeats = merged.get("emit.heartbeats.enabled")
        return heartbeats is None or self.typed(heartbeats, _java_bool, use=False)

    def _patterns(self, key: str) -> list[str]:
        patterns = _java_list(self.value(key))
        for pattern in patterns:
            try:
                compile_pattern(pattern)
            except UnsupportedPatternError as exc:
                raise self.fail(f"{key}: invalid regular expression {exc}") from None
        return patterns

    def _metric_names_formats(self, key: str) -> list[str]:
        """MM2's ``metric.names.formats`` (Kafka 4.3, KIP-1280): a list of ``legacy`` and ``new``."""
        formats = _java_list(self.value(key))
        wrong = [f for f in formats if f not in ("legacy", "new")]
        if wrong or not formats or len(set(formats)) != len(formats):
            raise self.fail(
                f"{key}: {self.value(key)!r} is not a list of the formats legacy and new, each at most once"
            )
        return formats

    def _policy(self, merged: dict[str, str]) -> tuple[str, str]:
        policy, separator = "default", "."
        if key := merged.get("replication.policy.class"):
            java_class = _trim(self.value(key))
            if java_class not in _POLICIES:
                raise self.fail(
                    f"{key}: {java_class!r} is a Java class mirrorlake cannot load; MM2's DefaultReplicationPolicy "
                    "and IdentityReplicationPolicy translate, a custom policy needs a mirrorlake YAML config "
                    "(replication_policy.class: module:Class)"
                )
            policy = _POLICIES[java_class]
        if key := merged.get("replication.policy.separator"):
            separator = _trim(self.value(key))
            if not separator:
                raise self.fail(f"{key}: must not be empty")
        return policy, separator

    def flows(self) -> list[dict[str, Any]]:
        pairs = list(self.flow)
        if "enabled" in self.top:  # MM2 creates every pair; a top-level enabled = true enables them all
            pairs += [(s, t) for s in self.aliases for t in self.aliases if s != t and (s, t) not in pairs]
        flows: list[dict[str, Any]] = []
        for pair in pairs:
            merged = self._merged(pair)
            flow: dict[str, Any] = {"source": pair[0], "target": pair[1], "enabled": self._enabled(pair, merged)}
            if pair not in self.flow and not flow["enabled"]:
                continue
            if "topics" in merged:
                flow["topics"] = self._patterns(merged["topics"])
            if exclude := merged.get("topics.exclude") or merged.get("topics.blacklist"):  # the new name wins
                flow["topics_exclude"] = self._patterns(exclude)
            if key := merged.get("offset.lag.max"):  # a sync at least every n records: any n <= 1 means each one
                flow["offset_lag_max"] = max(1, self.typed(key, _java_long))
            if "groups" in merged:
                flow["groups"] = self._patterns(merged["groups"])
            if exclude := merged.get("groups.exclude") or merged.get("groups.blacklist"):
                flow["groups_exclude"] = self._patterns(exclude)
            if key := merged.get("metric.names.formats"):
                flow["metric_names_formats"] = self._metric_names_formats(key)
            for java, fields in _FLOW_BOOLS.items():
                if key := merged.get(java):
                    flow.update(dict.fromkeys(fields, self.typed(key, _java_bool)))
            for java, ours in _FLOW_SECONDS.items():
                if key := merged.get(java):
                    seconds = self.typed(key, _java_long)
                    if seconds <= 0:
                        raise self.fail(f"{key}: must be a positive number of seconds (got {seconds})")
                    flow[ours] = seconds
            flows.append(flow)
        return flows

    def policy(self, flows: list[dict[str, Any]]) -> dict[str, str]:
        """The one policy of the enabled flows (of the top level when none is enabled)."""
        pairs: list[tuple[str, str] | None] = [(f["source"], f["target"]) for f in flows if f["enabled"]]
        policies: dict[tuple[str, str], str] = {}
        for pair in pairs or [None]:
            policies.setdefault(self._policy(self._merged(pair)), "->".join(pair) if pair else "top level")
        if len(policies) > 1:
            described = "; ".join(f"{flow}: {p} with separator {sep!r}" for (p, sep), flow in policies.items())
            raise self.fail(
                f"mirrorlake uses one replication policy for all flows; the enabled ones differ ({described})"
            )
        policy, separator = next(iter(policies))
        return {"class": policy, "separator": separator}

    def unused(self) -> list[str]:
        return [key for key in self.props if key not in self.used]


def _hinted(key: str, name: str, candidates: frozenset[str] | set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.75)
    return f"{key} (did you mean {key.removesuffix(name)}{close[0]}?)" if close else key


def mm2_to_config_dict(
    props: Mapping[str, str], *, source: str, unused: Callable[[list[str]], None] | None = None
) -> dict[str, Any]:
    """Translate MM2 properties to the document ``parse_config`` validates; ``source`` names the file.

    Raises ``ConfigError`` for keys MM2 does not define, flows naming clusters not in ``clusters``,
    malformed values and settings mirrorlake cannot honour; logs the accepted-but-unused keys (names
    only) at WARNING, or hands them to ``unused`` (a caller that reports them in its own words).
    """
    translation = _Translation(props, source)
    clusters = translation.clusters()
    flows = translation.flows()
    policy = translation.policy(flows)
    if (keys := translation.unused()) and unused is not None:
        unused(keys)
    elif keys:
        _log.warning("%s: accepted, not used yet: %s", source, ", ".join(keys))
    return {"clusters": clusters, "flows": flows, "replication_policy": policy}


def load_mm2_properties(path: Path) -> MirrorlakeConfig:
    """Read, translate and validate a ``connect-mirror-maker.properties`` file; errors name ``path``."""
    from replicator.config.files import read_config_text

    text = read_config_text(path, encoding="iso-8859-1")  # what Properties.load(InputStream) assumes
    try:
        props = parse_properties(text)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return parse_config(mm2_to_config_dict(props, source=str(path)), source=str(path))
