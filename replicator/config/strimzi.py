"""Strimzi's ``KafkaMirrorMaker2`` resource, read as it is, translated to a mirrorlake config.

Most MirrorMaker 2 deployments are this resource on Kubernetes. Strimzi turns it into MM2 connector
configurations; so does this module: the resource becomes MM2 properties (``clusters``,
``<alias>.bootstrap.servers``, each cluster's client security in librdkafka's names, ``S->T.<key>``
per mirror) and ``replicator.config.mm2_properties`` translates them, so both inputs mean the same
thing. What the resource says is checked first, field by field, and every problem names its path
(``spec.mirrors[0].topicsPattern``):

- API versions ``kafka.strimzi.io/v1alpha1``, ``v1beta1``, ``v1beta2`` (``spec.clusters`` with
  ``spec.connectCluster``, mirrors naming ``sourceCluster``/``targetCluster``) and ``v1`` (also
  ``spec.target`` and ``mirrors[].source`` cluster objects).
- A mirror copies only if it has a ``sourceConnector`` (as in Strimzi); its ``checkpointConnector``
  and ``heartbeatConnector`` turn checkpoints and heartbeats on (off without them, as in Strimzi).
  Connector ``config`` keys are MM2's (``sync.group.offsets.enabled``, ...); the same key in two
  connectors of one mirror must agree.
- Secrets: a TLS certificate or key is the file Strimzi mounts in its pod
  (``/opt/kafka/mm2-certs/<alias>/<secretName>/<key>``), a SASL password ``${file:...}`` of
  ``/opt/kafka/mm2-password/<alias>/<secretName>/<key>``; with ``MIRRORLAKE_SECRETS_DIR`` set, both
  are ``<dir>/<secretName>/<key>`` instead (a laptop, a test). A Secret's key may come from an
  environment variable instead, as a pod's ``env`` with ``secretKeyRef`` or a CI job's secret would
  give it: ``MIRRORLAKE_SECRET_<SECRETNAME>_<KEY>`` (upper case, every other character ``_``: Secret
  ``mm2-user``, key ``password`` -> ``MIRRORLAKE_SECRET_MM2_USER_PASSWORD``), set when the resource
  is read, wins over the files: a password becomes ``${env:...}``, a client certificate or key
  librdkafka's ``ssl.certificate.pem`` / ``ssl.key.pem`` of ``${env:...}``. Nothing secret is read
  here: passwords and keys stay references resolved when a client is made (trusted certificates,
  public, are read to bundle several).
- Fields mirrorlake has no use for (pod template, resources, probes, logging, metrics config, Connect
  worker ``config``, ``replicas``, ``version``, ``tasksMax``) are listed in one warning. Unknown
  fields are errors (with the closest known name). Known slips of printed examples are named: a
  ``secretName`` beside ``trustedCertificates`` instead of inside its entry (a warning: it is taken
  as the entry's secret), connectors directly under ``spec`` instead of inside a mirror (an error),
  a ``{Placeholder}`` version (a warning: it parses as a mapping).
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replicator.config.mm2_properties import mm2_to_config_dict
from replicator.config.patterns import UnsupportedPatternError, compile_pattern
from replicator.errors import ConfigError

__all__ = ["SECRETS_DIR_ENV", "SECRET_ENV_PREFIX", "secret_env_name", "is_strimzi_resource", "strimzi_to_config_dict"]

_log = logging.getLogger(__name__)

SECRETS_DIR_ENV = "MIRRORLAKE_SECRETS_DIR"
SECRET_ENV_PREFIX = "MIRRORLAKE_SECRET_"
_GROUP = "kafka.strimzi.io/"
_VERSIONS = ("v1alpha1", "v1beta1", "v1beta2", "v1")
_CERTS_MOUNT = Path("/opt/kafka/mm2-certs")
_PASSWORD_MOUNT = Path("/opt/kafka/mm2-password")

_TOP = {"apiVersion", "kind", "metadata", "spec", "status"}
_SPEC = {"version", "replicas", "connectCluster", "clusters", "target", "mirrors"}
_SPEC_UNUSED = {
    "image", "resources", "livenessProbe", "readinessProbe", "jvmOptions", "jmxOptions", "affinity",
    "tolerations", "logging", "clientRackInitImage", "rack", "metrics", "metricsConfig", "tracing", "template",
    "externalConfiguration", "plugins",
}  # fmt: skip
_CLUSTER = {"alias", "bootstrapServers", "tls", "authentication", "config"}
_TARGET_UNUSED = {"groupId", "configStorageTopic", "statusStorageTopic", "offsetStorageTopic"}
_MIRROR = {
    "sourceCluster", "targetCluster", "source", "sourceConnector", "checkpointConnector", "heartbeatConnector",
    "topicsPattern", "topicsExcludePattern", "topicsBlacklistPattern", "groupsPattern", "groupsExcludePattern",
    "groupsBlacklistPattern",
}  # fmt: skip
_CONNECTORS = ("sourceConnector", "checkpointConnector", "heartbeatConnector")
_CONNECTOR = {"config", "tasksMax", "pause", "state", "autoRestart", "listOffsets", "alterOffsets"}
_PATTERNS = {  # mirror field -> MM2 key (the deprecated *Blacklist* names mean the same)
    "topicsPattern": "topics",
    "topicsExcludePattern": "topics.exclude",
    "topicsBlacklistPattern": "topics.exclude",
    "groupsPattern": "groups",
    "groupsExcludePattern": "groups.exclude",
    "groupsBlacklistPattern": "groups.exclude",
}
_SASL = {"scram-sha-512": "SCRAM-SHA-512", "scram-sha-256": "SCRAM-SHA-256", "plain": "PLAIN"}


def is_strimzi_resource(data: Any) -> bool:
    """A document that says it is a Strimzi resource (its ``kind`` or its ``apiVersion`` group)."""
    return isinstance(data, dict) and (
        data.get("kind") == "KafkaMirrorMaker2" or str(data.get("apiVersion", "")).startswith(_GROUP)
    )


@dataclass
class _Reading:
    """What reading one resource found: errors, unused paths, notes, the MM2 keys and their paths."""

    secrets_dir: Path | None
    environ: Mapping[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    props: dict[str, str] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)  # MM2 key -> the resource path it came from

    def fields(
        self, value: Any, path: str, known: set[str], unused: set[str] | frozenset[str] = frozenset()
    ) -> dict[str, Any]:
        """``value`` as a mapping of known fields (unknown ones are errors; ``unused`` ones listed)."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.errors.append(f"{path}: expected a mapping, got {_kind(value)}")
            return {}
        for name in value:
            where = f"{path}.{name}" if path else str(name)
            if name in unused:
                self.unused.append(where)
            elif name not in known:
                close = difflib.get_close_matches(str(name), sorted(known | unused), n=1, cutoff=0.7)
                hint = f" (did you mean {close[0]}?)" if close else ""
                self.errors.append(f"{where}: unknown field{hint}")
        return {k: v for k, v in value.items() if k in known}

    def text(self, value: Any, path: str, *, required: bool = False) -> str | None:
        if value is None:
            if required:
                self.errors.append(f"{path}: missing")
            return None
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            self.errors.append(f"{path}: expected a string, got {_kind(value)}")
            return None
        return str(value)

    def put(self, key: str, value: str, path: str) -> None:
        if key in self.props and self.props[key] != value:
            self.errors.append(f"{path}: {value!r} differs from {self.origin[key]} ({self.props[key]!r}) for {key}")
            return
        self.props[key], self.origin[key] = value, path

    # -- secrets ---------------------------------------------------------------------------------
    def cert_file(self, alias: str, secret: str, key: str) -> Path:
        if self.secrets_dir is not None:
            return self.secrets_dir / secret / key
        return _CERTS_MOUNT / alias / secret / key

    def password_file(self, alias: str, secret: str, key: str) -> Path:
        if self.secrets_dir is not None:
            return self.secrets_dir / secret / key
        return _PASSWORD_MOUNT / alias / secret / key

    def secret_env(self, secret: str, key: str) -> str | None:
        """The environment variable that holds the Secret's key, when it is set (None: use the files)."""
        name = secret_env_name(secret, key)
        return name if name in self.environ else None


def secret_env_name(secret: str, key: str) -> str:
    """``MIRRORLAKE_SECRET_<SECRETNAME>_<KEY>``: a Kubernetes Secret's key as an environment variable."""
    return SECRET_ENV_PREFIX + re.sub(r"[^A-Z0-9]", "_", f"{secret}_{key}".upper())


def strimzi_to_config_dict(data: Mapping[str, Any], *, source: str) -> dict[str, Any]:
    """The mirrorlake config document of a ``KafkaMirrorMaker2`` resource; ``source`` names the file.

    Raises ``ConfigError`` listing every problem with its path; logs the unused fields (one WARNING)
    and each tolerated slip (one WARNING each)."""
    directory = os.environ.get(SECRETS_DIR_ENV)
    reading = _Reading(Path(directory).absolute() if directory else None, os.environ)
    top = reading.fields(dict(data), "", _TOP)
    api = str(top.get("apiVersion", ""))
    if not api.startswith(_GROUP) or api.removeprefix(_GROUP) not in _VERSIONS:
        known = ", ".join(_GROUP + v for v in _VERSIONS)
        reading.errors.append(f"apiVersion: {api or 'missing'}: expected one of {known}")
    if top.get("kind") != "KafkaMirrorMaker2":
        reading.errors.append(f"kind: {top.get('kind')!r}: expected KafkaMirrorMaker2")
    name = (top.get("metadata") or {}).get("name") if isinstance(top.get("metadata"), dict) else None
    _read_spec(reading, top.get("spec"))
    if reading.errors:
        raise ConfigError(f"{source}: not a usable KafkaMirrorMaker2 resource: " + "; ".join(reading.errors))
    unused_keys: list[str] = []
    try:
        document = mm2_to_config_dict(reading.props, source=source, unused=unused_keys.extend)
    except ConfigError as exc:  # MM2's key names back to the resource's paths
        message = str(exc)
        for key in sorted(reading.origin, key=len, reverse=True):
            message = message.replace(key, reading.origin[key])
        raise ConfigError(message) from None
    reading.unused += [reading.origin[k] for k in unused_keys if k in reading.origin]
    if reading.unused:
        _log.warning("%s: fields mirrorlake does not use: %s", source, ", ".join(reading.unused))
    for note in reading.notes:
        _log.warning("%s: %s", source, note)
    if isinstance(name, str) and name:
        document["replicator_id"] = name
    if not document["flows"]:
        _log.warning("%s: spec.mirrors: none; there is nothing to replicate", source)
    return document


def _read_spec(reading: _Reading, value: Any) -> None:
    spec = reading.fields(value, "spec", _SPEC | set(_CONNECTORS), _SPEC_UNUSED)
    for k in _CONNECTORS:  # a known slip: connectors directly under spec
        if k in spec:
            reading.errors.append(f"spec.{k}: belongs inside each entry of spec.mirrors, not directly under spec")
    if value is None:
        reading.errors.append("spec: missing")
    if "version" in spec and not isinstance(spec["version"], str | int | float):
        placeholder = " (a {Placeholder} of the docs parses as a mapping)" if isinstance(spec["version"], dict) else ""
        reading.notes.append(
            f"spec.version: expected a Kafka version, got {_kind(spec['version'])}{placeholder}; unused"
        )
    for unused in ("version", "replicas"):
        if unused in spec:
            reading.unused.append(f"spec.{unused}")
    if "replicas" in spec:
        reading.notes.append(
            f"spec.replicas: {spec['replicas']}: run that many `mirrorlake replicate` processes with this "
            "config; they share the flows' partitions through each flow's consumer group"
        )
    clusters = _read_clusters(reading, spec)
    target = _target_alias(reading, spec, clusters)
    mirrors = spec.get("mirrors")
    if mirrors is not None and not isinstance(mirrors, list):
        reading.errors.append(f"spec.mirrors: expected a list, got {_kind(mirrors)}")
        mirrors = None
    for i, mirror in enumerate(mirrors or []):
        _read_mirror(reading, mirror, f"spec.mirrors[{i}]", clusters, target)
    reading.props["clusters"] = ", ".join(clusters)
    for alias, (cluster, path) in clusters.items():
        _client(reading, alias, cluster, path)


def _read_clusters(reading: _Reading, spec: dict[str, Any]) -> dict[str, tuple[dict[str, Any], str]]:
    """alias -> (its fields, its path), from ``spec.clusters`` and ``spec.target`` (v1)."""
    out: dict[str, tuple[dict[str, Any], str]] = {}
    listed = spec.get("clusters")
    if listed is not None and not isinstance(listed, list):
        reading.errors.append(f"spec.clusters: expected a list, got {_kind(listed)}")
        listed = []
    entries: list[tuple[Any, str, set[str]]] = [(c, f"spec.clusters[{i}]", set()) for i, c in enumerate(listed or [])]
    if "target" in spec:
        entries.append((spec["target"], "spec.target", _TARGET_UNUSED))
    if not entries:
        reading.errors.append(
            "spec.clusters: missing (or spec.target): the clusters to connect to (a fragment? the `# ...` of a "
            "printed example stands for fields it leaves out)"
        )
    for value, path, unused in entries:
        _add_cluster(reading, out, value, path, unused)
    return out


def _add_cluster(
    reading: _Reading, out: dict[str, tuple[dict[str, Any], str]], value: Any, path: str, unused: set[str]
) -> str | None:
    cluster = reading.fields(value, path, _CLUSTER | unused, unused | {"config"})
    alias = reading.text(cluster.get("alias"), f"{path}.alias", required=True)
    reading.text(cluster.get("bootstrapServers"), f"{path}.bootstrapServers", required=True)
    if alias is None:
        return None
    if alias in out and out[alias][1] != path:
        reading.errors.append(f"{path}.alias: {alias!r} is also {out[alias][1]}")
    out[alias] = (cluster, path)
    return alias


def _target_alias(reading: _Reading, spec: dict[str, Any], clusters: dict[str, Any]) -> str | None:
    """The Connect (target) cluster: ``spec.target``'s alias or ``spec.connectCluster``."""
    if "target" in spec:
        return next((a for a, (_c, p) in clusters.items() if p == "spec.target"), None)
    alias = reading.text(spec.get("connectCluster"), "spec.connectCluster", required=bool(clusters))
    if alias is not None and alias not in clusters:
        reading.errors.append(
            f"spec.connectCluster: {alias!r} is not an alias of spec.clusters ({', '.join(clusters)})"
        )
    return alias


def _read_mirror(
    reading: _Reading, value: Any, path: str, clusters: dict[str, tuple[dict[str, Any], str]], target: str | None
) -> None:
    mirror = reading.fields(value, path, _MIRROR)
    if "source" in mirror:
        source = _add_cluster(reading, clusters, mirror["source"], f"{path}.source", set())
    else:
        source = reading.text(mirror.get("sourceCluster"), f"{path}.sourceCluster", required=True)
    sink = reading.text(mirror.get("targetCluster"), f"{path}.targetCluster") or target
    for alias, where in ((source, "sourceCluster"), (sink, "targetCluster")):
        if alias is not None and clusters and alias not in clusters:
            reading.errors.append(f"{path}.{where}: {alias!r} is not an alias of spec.clusters ({', '.join(clusters)})")
    if sink is not None and target is not None and sink != target:
        reading.errors.append(
            f"{path}.targetCluster: {sink!r} is not the Connect cluster {target!r}: the target of every mirror is "
            "where its state lives (Strimzi requires the same)"
        )
    if sink is None:
        reading.errors.append(f"{path}.targetCluster: missing (or spec.connectCluster / spec.target)")
    if source is None or sink is None:
        return
    flow = f"{source}->{sink}"
    if "sourceConnector" not in mirror:
        reading.errors.append(
            f"{path}.sourceConnector: missing: a mirror without it copies nothing in Strimzi, and every mirrorlake "
            "flow copies (add `sourceConnector: {}`)"
        )
    reading.put(f"{flow}.enabled", "true", path)
    for name, key in _PATTERNS.items():
        if (pattern := reading.text(mirror.get(name), f"{path}.{name}")) is not None:
            for part in pattern.split(","):
                try:
                    compile_pattern(part.strip())
                except UnsupportedPatternError as exc:
                    reading.errors.append(f"{path}.{name}: invalid regular expression {exc}")
            reading.put(f"{flow}.{key}", pattern, f"{path}.{name}")
    reading.put(
        f"{flow}.emit.checkpoints.enabled", _java("checkpointConnector" in mirror), f"{path}.checkpointConnector"
    )
    reading.put(f"{flow}.emit.heartbeats.enabled", _java("heartbeatConnector" in mirror), f"{path}.heartbeatConnector")
    for connector in _CONNECTORS:
        if connector in mirror:
            _read_connector(reading, mirror[connector], f"{path}.{connector}", flow)


def _read_connector(reading: _Reading, value: Any, path: str, flow: str) -> None:
    connector = reading.fields(value, path, _CONNECTOR, _CONNECTOR - {"config", "state", "pause"})
    if connector.get("pause") is True or connector.get("state") in ("paused", "stopped"):
        reading.errors.append(
            f"{path}: a paused or stopped connector: mirrorlake has no paused flows (remove the mirror)"
        )
    config = connector.get("config") or {}
    if not isinstance(config, dict):
        reading.errors.append(f"{path}.config: expected a mapping, got {_kind(config)}")
        return
    for key, raw in config.items():
        where = f"{path}.config.{key}"
        if isinstance(raw, dict | list) or raw is None:
            reading.errors.append(f"{where}: expected a value, got {_kind(raw)}")
            continue
        reading.put(f"{flow}.{key}", _java(raw), where)


def _client(reading: _Reading, alias: str, cluster: dict[str, Any], path: str) -> None:
    """``<alias>.bootstrap.servers`` and its security settings (librdkafka's names) from ``tls`` and
    ``authentication``."""
    reading.put(f"{alias}.bootstrap.servers", str(cluster.get("bootstrapServers", "")), f"{path}.bootstrapServers")
    tls = _trusted(reading, alias, cluster.get("tls"), f"{path}.tls")
    auth = reading.fields(
        cluster.get("authentication"), f"{path}.authentication",
        {"type", "certificateAndKey", "username", "passwordSecret"},
    )  # fmt: skip
    kind = auth.get("type")
    sasl = _SASL.get(str(kind)) if kind is not None else None
    if kind is not None and kind != "tls" and sasl is None:
        reading.errors.append(
            f"{path}.authentication.type: {kind!r}: mirrorlake reads tls, scram-sha-512, scram-sha-256 and plain "
            "(OAuth and custom authentication need a mirrorlake YAML config with librdkafka's sasl.oauthbearer.*)"
        )
        return
    protocol = ("SASL_SSL" if tls else "SASL_PLAINTEXT") if sasl else ("SSL" if tls or kind == "tls" else None)
    if protocol:
        reading.put(f"{alias}.security.protocol", protocol, f"{path}.tls")
    where = f"{path}.authentication"
    if kind == "tls":
        pair = reading.fields(
            auth.get("certificateAndKey"), f"{where}.certificateAndKey", {"secretName", "certificate", "key"}
        )
        names = [
            reading.text(pair.get(k), f"{where}.certificateAndKey.{k}", required=True)
            for k in ("secretName", "certificate", "key")
        ]
        if None not in names:
            secret, cert, key = (str(n) for n in names)
            for part, name in (("certificate", cert), ("key", key)):
                if (variable := reading.secret_env(secret, name)) is not None:
                    reading.put(f"{alias}.ssl.{part}.pem", f"${{env:{variable}}}", f"{where}.certificateAndKey")
                else:
                    file = str(reading.cert_file(alias, secret, name))
                    reading.put(f"{alias}.ssl.{part}.location", file, f"{where}.certificateAndKey")
    elif sasl:
        user = reading.text(auth.get("username"), f"{where}.username", required=True)
        held = reading.fields(auth.get("passwordSecret"), f"{where}.passwordSecret", {"secretName", "password"})
        names = [
            reading.text(held.get(k), f"{where}.passwordSecret.{k}", required=True) for k in ("secretName", "password")
        ]
        if user is not None and None not in names:
            reading.put(f"{alias}.sasl.mechanisms", sasl, f"{where}.type")
            reading.put(f"{alias}.sasl.username", user, f"{where}.username")
            secret, key = str(names[0]), str(names[1])
            if (variable := reading.secret_env(secret, key)) is not None:
                reading.put(f"{alias}.sasl.password", f"${{env:{variable}}}", f"{where}.passwordSecret")
            else:
                password = reading.password_file(alias, secret, key)
                reading.put(f"{alias}.sasl.password", f"${{file:{password}}}", f"{where}.passwordSecret")


def _trusted(reading: _Reading, alias: str, value: Any, path: str) -> bool:
    """``ssl.ca.location`` (one certificate) or ``ssl.ca.pem`` (several, or a ``pattern``) from
    ``tls.trustedCertificates``; whether the cluster speaks TLS at all."""
    if value is None:
        return False
    tls = reading.fields(value, path, {"trustedCertificates", "secretName"})
    entries = tls.get("trustedCertificates") or []
    if not isinstance(entries, list):
        reading.errors.append(f"{path}.trustedCertificates: expected a list, got {_kind(entries)}")
        return True
    stray = reading.text(tls.get("secretName"), f"{path}.secretName")
    files: list[Path] = []
    pems: list[str] = []  # certificates given as environment variables (public: read now)
    for i, entry in enumerate(entries):
        where = f"{path}.trustedCertificates[{i}]"
        cert = reading.fields(entry, where, {"secretName", "certificate", "pattern"})
        secret = reading.text(cert.get("secretName"), f"{where}.secretName")
        if secret is None and stray is not None:
            reading.notes.append(
                f"{path}.secretName: belongs inside each entry of {path}.trustedCertificates; taken as "
                f"{where}.secretName"
            )
            secret = stray
        if secret is None:
            reading.errors.append(f"{where}.secretName: missing")
            continue
        name = reading.text(cert.get("certificate"), f"{where}.certificate")
        pattern = reading.text(cert.get("pattern"), f"{where}.pattern")
        if (name is None) == (pattern is None):
            reading.errors.append(f"{where}: give one of certificate or pattern")
        elif name is not None and (variable := reading.secret_env(secret, name)) is not None:
            pems.append(reading.environ[variable])
        elif name is not None:
            files.append(reading.cert_file(alias, secret, name))
        else:
            found = sorted(reading.cert_file(alias, secret, "x").parent.glob(str(pattern)))
            if not found:
                reading.errors.append(
                    f"{where}.pattern: no file matches {reading.cert_file(alias, secret, str(pattern))}"
                )
            files += found
    if stray is not None and all(isinstance(e, dict) and e.get("secretName") for e in entries):
        reading.errors.append(
            f"{path}.secretName: unknown field (secretName belongs in each trustedCertificates entry)"
        )
    if len(files) == 1 and not pems:
        reading.put(f"{alias}.ssl.ca.location", str(files[0]), f"{path}.trustedCertificates")
    elif files or pems:  # librdkafka takes one CA file: their certificates, concatenated (public, not secret)
        try:
            bundle = "".join([*(f.read_text(encoding="ascii") for f in files), *(_line_ended(p) for p in pems)])
        except (OSError, UnicodeDecodeError) as exc:
            reading.errors.append(f"{path}.trustedCertificates: cannot read a certificate: {exc}")
            return True
        reading.put(f"{alias}.ssl.ca.pem", bundle, f"{path}.trustedCertificates")
    return True


def _line_ended(pem: str) -> str:
    return pem if pem.endswith("\n") else pem + "\n"


def _java(value: Any) -> str:
    """A YAML scalar as MM2's properties would hold it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", type(None): "nothing"}.get(type(value), type(value).__name__)
