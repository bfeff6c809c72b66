"""The configuration file: one YAML document describing clusters, flows and where state goes.

Every key is declared once here, with its type and default; unknown keys are an error that names
them. ``load_config`` turns pydantic's validation errors into one ``ConfigError`` whose message
names the file, the key path and what was expected, so a typo never becomes a silent default.

Client settings under ``clusters.<alias>.client`` are passed to librdkafka unchanged (SASL, SSL,
...). Their values are ``SecretStr`` so they never appear in reprs, logs or events.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from replicator.config.patterns import UnsupportedPatternError, compile_pattern
from replicator.config.secrets import resolve_references
from replicator.errors import ConfigError

__all__ = [
    "ClusterConfig",
    "FlowConfig",
    "PolicyConfig",
    "LakehouseConfig",
    "SparkConfig",
    "LocalKafkaConfig",
    "MirrorlakeConfig",
    "parse_config",
    "DEFAULT_TOPICS_EXCLUDE",
    "DEFAULT_CONFIG_EXCLUDES",
    "DEFAULT_GROUPS_EXCLUDE",
]

# MM2's DefaultTopicFilter.TOPICS_EXCLUDE_DEFAULT, plus our own state topic family.
DEFAULT_TOPICS_EXCLUDE: tuple[str, ...] = (
    r"mm2.*\.internal",
    r".*\.internal",
    r".*-internal",
    r".*\.replica",
    r"__.*",
    r"_confluent.*",
    r"mirrorlake\..*",
)
# MM2's DefaultConfigPropertyFilter exclusions, plus the newer timestamp bounds (see topic_config_sync).
DEFAULT_CONFIG_EXCLUDES: tuple[str, ...] = (
    r"follower\.replication\.throttled\.replicas",
    r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\.difference\.max\.ms",
    r"message\.timestamp\.before\.max\.ms",
    r"message\.timestamp\.after\.max\.ms",
    r"message\.timestamp\.type",
    r"unclean\.leader\.election\.enable",
    r"min\.insync\.replicas",
)
# MM2's DefaultGroupFilter.GROUPS_EXCLUDE_DEFAULT, plus the replicator's own groups.
DEFAULT_GROUPS_EXCLUDE: tuple[str, ...] = (r"console-consumer-.*", r"connect-.*", r"__.*", r"mirrorlake\..*")
_ALIAS = re.compile(r"^[A-Za-z0-9_\-]+$")


def _librdkafka_text(value: Any) -> Any:
    """A YAML scalar as librdkafka spells it; anything else (a list, a map) is left for the type
    check to name."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ClusterConfig(_Model):
    """One Kafka cluster, known by its alias."""

    bootstrap_servers: str = Field(min_length=1, description="host:port[,host:port...]")
    client: dict[str, SecretStr] = Field(
        default_factory=dict, description="librdkafka properties (security.protocol, sasl.*, ssl.*)"
    )

    @field_validator("client", mode="before")
    @classmethod
    def _scalars_as_text(cls, value: Any) -> Any:
        """YAML's ``linger.ms: 5`` or ``enable.idempotence: true`` as librdkafka's text (``"5"``,
        ``"true"``): the properties are text to librdkafka, and quoting every number is a trap."""
        if not isinstance(value, dict):
            return value
        return {k: _librdkafka_text(v) for k, v in value.items()}

    def client_config(self) -> dict[str, Any]:
        """The librdkafka settings for this cluster, secrets revealed (never log the result).

        ``${env:NAME}`` and ``${file:PATH}`` references are resolved here, at each call.
        """
        conf: dict[str, Any] = {
            k: resolve_references(v.get_secret_value(), setting=f"client setting {k}") for k, v in self.client.items()
        }
        conf["bootstrap.servers"] = self.bootstrap_servers
        return conf


class PolicyConfig(_Model):
    """Which ``ReplicationPolicy`` names remote topics (MM2's ``replication.policy.class``)."""

    class_: str = Field(default="default", alias="class", description="default | identity | module:Class")
    separator: str = Field(default=".", min_length=1, description="between the source alias and the topic")


class FlowConfig(_Model):
    """One directed replication ``source->target`` with its topic selection."""

    source: str = Field(description="the alias of the cluster copied from")
    target: str = Field(description="the alias of the cluster copied to")
    enabled: bool = Field(default=True, description="false: the flow is declared (failover, failback) but not run")
    topics: tuple[str, ...] = Field(
        default=(".*",), description="topics to copy: RE2 patterns matched against whole names (MM2's topics)"
    )
    topics_exclude: tuple[str, ...] = Field(
        default=DEFAULT_TOPICS_EXCLUDE, description="topics never copied, though selected (MM2's topics.exclude)"
    )
    offset_lag_max: int = Field(default=100, ge=1, description="MM2's offset.lag.max")
    sync_interval_seconds: float = Field(
        default=1.0, gt=0, description="how often the last copied offset is published (flush sync)"
    )
    exactly_once: bool = Field(
        default=False, description="transactional writes; source positions kept in the target transactionally"
    )
    sync_topic_configs: bool = Field(default=True, description="MM2's sync.topic.configs.enabled")
    config_properties_exclude: tuple[str, ...] = Field(
        default=DEFAULT_CONFIG_EXCLUDES,
        description="topic config keys never synced (MM2's config.properties.exclude); divergence marks them expected",
    )
    sync_topic_acls: bool = Field(default=True, description="MM2's sync.topic.acls.enabled")
    sync_acl_deletions: bool = Field(
        default=False,
        description="opt-in: a target ACL binding this flow created is deleted once the source binding it copies "
        "is gone (as Orbit and Shadowing do); bindings anyone else made are never touched. Each creation and "
        "deletion is a metadata_change event",
    )
    sync_topic_deletions: bool = Field(
        default=False,
        description="opt-in: a source topic the flow copied, once deleted, deletes its remote topic on the target "
        "(found while running, or at the next start); never under the identity policy, where the target's topic "
        "of that name may hold its own records. Either way the decision is a metadata_change event",
    )
    on_topic_recreated: Literal["continue", "stop"] = Field(
        default="continue",
        description="a source topic deleted and created again (a new topic id): continue copies the new "
        "topic from its start into the same remote topic, as a new life of the offset mapping; stop fails "
        "the flow with an error naming it (MM2's proposed fail-fast), and again at each start while nothing of "
        "the new topic is copied and stop is still set. Either way a topic_recreated event is emitted first "
        "(once). Exactly-once flows always stop.",
    )
    on_remote_topic_recreated: Literal["recopy", "stop"] = Field(
        default="recopy",
        description="a remote topic deleted (and created again) on the target, found by its topic id at start "
        "and at each topic refresh: its copies are gone. recopy copies the source topic again from its log "
        "start into it, as a new life of the offset mapping; stop fails the flow with an error naming it, and "
        "again at each start while nothing is recopied and stop is still set. Either way a topic_recreated "
        "event (side target) is emitted first (once). Exactly-once flows always stop. "
        "Deleted while the flow runs, and not created again, it fails the flow's writes: the flow stops "
        "naming it, and its next start creates it and goes on as set here.",
    )
    refresh_topics_interval_seconds: float = Field(default=5.0, gt=0, description="new topics and partitions")
    stall_seconds: float = Field(
        default=60.0,
        gt=0,
        description="records behind, no cluster waited for, and neither the positions nor the target's "
        "acknowledgements moving for this long: a stall (a WARNING, /health degraded, every partition "
        "resumed; twice as long: the consumer group joined anew). Measured at each topic refresh.",
    )
    sync_topic_configs_interval_seconds: float = Field(default=10.0, gt=0, description="configs and ACLs")
    transaction_interval_seconds: float = Field(
        default=1.0, gt=0, description="exactly-once: how long a transaction collects records before it commits"
    )
    copy_engine: Literal["auto", "native", "python"] = Field(
        default="auto",
        description="how records are produced: native (the compiled path), python, or auto (native where it is "
        "built, python for exactly-once flows)",
    )

    groups: tuple[str, ...] = Field(default=(".*",), description="consumer groups to checkpoint (MM2's groups)")
    groups_exclude: tuple[str, ...] = Field(
        default=DEFAULT_GROUPS_EXCLUDE, description="groups never checkpointed (MM2's groups.exclude)"
    )
    emit_checkpoints: bool = Field(default=True, description="MM2's emit.checkpoints.enabled")
    emit_checkpoints_interval_seconds: float = Field(default=5.0, gt=0, description="how often groups are checkpointed")
    emit_mm2_checkpoints: bool = Field(
        default=True,
        description="with emit_checkpoints, also write them as MM2 does (<source>.checkpoints.internal on the "
        "target), so MM2's RemoteClusterUtils.translateOffsets works",
    )
    emit_mm2_offset_syncs: bool = Field(
        default=False,
        description="also write MM2's offset syncs (mm2-offset-syncs.<target>.internal on the source), "
        "so an MM2 started later translates the history mirrorlake copied",
    )
    sync_group_offsets: bool = Field(
        default=False, description="write translated offsets to the target for groups inactive there"
    )
    emit_heartbeats: bool = Field(default=True, description="MM2's emit.heartbeats.enabled")
    emit_heartbeats_interval_seconds: float = Field(default=1.0, gt=0, description="how often a heartbeat is written")
    watermarks_interval_seconds: float = Field(default=5.0, gt=0, description="log-start/end of both sides")
    state_snapshot_interval_seconds: float = Field(
        default=60.0, gt=0, description="how often the flow's compacted state snapshot is written"
    )
    config_snapshots_interval_seconds: float = Field(
        default=30.0, gt=0, description="how often configs and ACLs are compared; a snapshot is emitted on change"
    )
    config_snapshots_refresh_seconds: float = Field(
        default=3600.0, gt=0, description="an unchanged topic's snapshot is re-emitted this often"
    )
    audit: bool = Field(default=True, description="count and checksum windows of both sides")
    audit_window_records: int = Field(default=1000, ge=1, description="upstream offsets per audit window")
    audit_interval_seconds: float = Field(default=5.0, gt=0, description="how often new audit windows are read")
    metric_names_formats: tuple[Literal["legacy", "new"], ...] = Field(
        default=("legacy",),
        min_length=1,
        description="MM2's metric.names.formats (KIP-1280): the layouts of the MM2-named metrics, legacy "
        "(kafka.connect.mirror:type=MirrorSourceConnector,...), new (kafka.connect:type=plugins,...) or both",
    )

    @field_validator("metric_names_formats")
    @classmethod
    def _formats_once(cls, formats: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(formats)) != len(formats):
            raise ValueError(f"a format is named twice: {', '.join(formats)}")
        return formats

    @field_validator("topics", "topics_exclude", "config_properties_exclude", "groups", "groups_exclude")
    @classmethod
    def _regexes_compile(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            try:
                compile_pattern(pattern)
            except UnsupportedPatternError as exc:
                raise ValueError(f"invalid regular expression {exc}") from None
        return patterns

    @model_validator(mode="after")
    def _engine_fits(self) -> FlowConfig:
        if self.exactly_once and self.copy_engine == "native":
            raise ValueError("copy_engine native does not do exactly-once: use auto or python")
        return self

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"


_REGION = "us-east-1"  # AWS's default, and what S3-compatible stores accept


class S3Config(_Model):
    """How every engine reaches a lakehouse at ``s3://bucket/prefix`` (AWS or an S3-compatible store).

    A key left out comes from the standard AWS environment (``AWS_ACCESS_KEY_ID``,
    ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``). Keys
    accept ``${env:NAME}`` and ``${file:PATH}``, resolved when a store is opened, never logged.
    """

    endpoint: str | None = Field(
        default=None, description="the S3 API's URL for an S3-compatible store (http://host:port); none: AWS"
    )
    region: str | None = Field(default=None, description="the bucket's region (else AWS_REGION, else us-east-1)")
    access_key_id: SecretStr | None = Field(default=None, description="the access key id")
    secret_access_key: SecretStr | None = Field(default=None, description="the secret access key")
    session_token: SecretStr | None = Field(default=None, description="a temporary credential's session token")
    path_style: bool | None = Field(
        default=None, description="path-style addressing (host/bucket/key); default: on with an endpoint"
    )

    def resolved(self) -> dict[str, str | None]:
        """endpoint, region and credentials, references and the AWS environment resolved (never log it)."""

        def secret(value: SecretStr | None, setting: str, env: str) -> str | None:
            if value is None:
                return os.environ.get(env) or None
            return resolve_references(value.get_secret_value(), setting=f"lakehouse.s3.{setting}")

        endpoint = self.endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        return {
            "endpoint": endpoint or None,
            "region": self.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or _REGION,
            "access_key_id": secret(self.access_key_id, "access_key_id", "AWS_ACCESS_KEY_ID"),
            "secret_access_key": secret(self.secret_access_key, "secret_access_key", "AWS_SECRET_ACCESS_KEY"),
            "session_token": secret(self.session_token, "session_token", "AWS_SESSION_TOKEN"),
            "path_style": "true" if (self.path_style if self.path_style is not None else bool(endpoint)) else "false",
        }


class LakehouseConfig(_Model):
    """Where the Delta tables and the streaming checkpoints live, and what builds small increments."""

    path: str = Field(
        default="lakehouse-data",
        description="the lakehouse: a directory (tables, checkpoints), or s3://bucket/prefix on an object store",
    )
    s3: S3Config = Field(default=S3Config(), description="how to reach an s3:// lakehouse.path")

    @field_validator("path", mode="before")
    @classmethod
    def _one_place(cls, value: Any) -> Any:
        """A local path or ``s3://bucket[/prefix]`` (``s3a://`` read as ``s3://``); any other scheme is refused
        by name, not read as a relative directory called ``gs:``."""
        text = str(value) if isinstance(value, Path) else value
        if not isinstance(text, str):
            return value
        match = re.fullmatch(r"([A-Za-z][A-Za-z0-9+.-]*)://(.*)", text)
        if match is None:
            return text
        scheme, rest = match.group(1).lower(), match.group(2).strip("/")
        if scheme not in ("s3", "s3a"):
            raise ValueError(f"{text}: the {scheme}:// scheme is not supported (a local path or s3://bucket/prefix)")
        bucket = rest.split("/", 1)[0]
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket):
            raise ValueError(f"{text}: {bucket!r} is not an S3 bucket name (3-63 of a-z, 0-9, '.', '-')")
        return f"s3://{rest}"

    def at(self, path: str) -> LakehouseConfig:
        """This lakehouse's settings for another ``path`` (``mirrorlake sql --lakehouse``), checked as the
        config's own: ``ConfigError`` naming the path when it is not one."""
        try:
            return self.model_validate({**self.model_dump(), "path": path})
        except ValidationError as exc:
            raise ConfigError(f"--lakehouse: {_describe(exc.errors(include_url=False)[0])}") from None

    incremental_engine: Literal["duckdb", "spark"] = Field(
        default="duckdb",
        description="an incremental build of a gold table with a DuckDB twin runs on DuckDB and delta-rs "
        "(no Spark job); spark keeps every gold table on Spark",
    )


class SparkConfig(_Model):
    master: str = Field(default="local[*]", description="Spark's master URL (local[*], spark://host:7077)")
    conf: dict[str, str] = Field(default_factory=dict, description="extra Spark settings (spark.* keys)")


class LocalKafkaConfig(_Model):
    """How ``mirrorlake clusters up`` runs a broker for each cluster bound to 127.0.0.1."""

    version: str = Field(default="4.3.1", description="the Apache Kafka version (jars from Maven Central)")
    work_dir: Path = Field(default=Path(".mirrorlake/clusters"), description="the brokers' logs and data")
    heap: str = Field(default="512m", description="each broker's JVM heap")


class MirrorlakeConfig(_Model):
    clusters: dict[str, ClusterConfig] = Field(description="every cluster by its alias (letters, digits, _ and -)")
    flows: tuple[FlowConfig, ...] = Field(default=(), description="the directed replications source->target")
    replication_policy: PolicyConfig = Field(
        default=PolicyConfig(), description="how remote topics are named, for every flow"
    )
    state_topic: str = Field(
        default="mirrorlake.events", description="the append-only log of replication state, on each flow's target"
    )
    positions_topic: str = Field(
        default="mirrorlake.positions", description="exactly-once flows: compacted topic of source positions"
    )
    heartbeats_topic: str = Field(default="heartbeats", description="where each cluster's heartbeats are written")
    replicator_id: str | None = Field(default=None, description="defaults to host name and process id")
    provenance_header: bool | None = Field(
        default=None,
        description="stamp copies with the clusters they came from; default: only under a policy "
        "that cannot detect cycles by name (identity)",
    )
    status_port: int | None = Field(
        default=None, ge=0, le=65535, description="serve /metrics and /health on 127.0.0.1 (0: any free port)"
    )
    status_host: str = Field(default="127.0.0.1", description="the address /metrics and /health bind to")
    connect_timeout_seconds: float = Field(
        default=30.0, gt=0, description="how long to retry an unreachable cluster before giving up"
    )
    stop_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="on SIGTERM, how long a flow waits for its target to take what is in flight; "
        "then it stops without it (not committed: copied again at restart)",
    )
    lakehouse: LakehouseConfig = Field(default=LakehouseConfig(), description="the Delta Lake lakehouse")
    spark: SparkConfig = Field(default=SparkConfig(), description="the Spark session of lakehouse builds")
    local_kafka: LocalKafkaConfig = Field(
        default=LocalKafkaConfig(), description="the local brokers of `mirrorlake clusters up` and the demo"
    )

    @field_validator("clusters")
    @classmethod
    def _aliases_valid(cls, clusters: dict[str, ClusterConfig]) -> dict[str, ClusterConfig]:
        if not clusters:
            raise ValueError("at least one cluster is required")
        for alias in clusters:
            if not _ALIAS.match(alias):
                raise ValueError(f"cluster alias {alias!r} may only use letters, digits, '_' and '-'")
        return clusters

    @model_validator(mode="after")
    def _flows_reference_known_clusters(self) -> MirrorlakeConfig:
        known = ", ".join(sorted(self.clusters))
        seen: set[str] = set()
        for i, flow in enumerate(self.flows):
            for side in ("source", "target"):
                alias = getattr(flow, side)
                if alias not in self.clusters:
                    raise ValueError(f"flows[{i}].{side}: unknown cluster {alias!r} (known: {known})")
            if flow.source == flow.target:
                raise ValueError(f"flows[{i}]: source and target are both {flow.source!r}")
            if flow.name in seen:
                raise ValueError(f"flows[{i}]: flow {flow.name} is declared twice")
            seen.add(flow.name)
        return self

    def cluster(self, alias: str) -> ClusterConfig:
        try:
            return self.clusters[alias]
        except KeyError:
            known = ", ".join(sorted(self.clusters))
            raise ConfigError(f"unknown cluster {alias!r} (known: {known})") from None

    def flow(self, name: str) -> FlowConfig:
        for flow in self.flows:
            if flow.name == name:
                return flow
        known = ", ".join(f.name for f in self.flows) or "none"
        raise ConfigError(f"unknown flow {name!r} (configured flows: {known})")

    def enabled_flows(self) -> tuple[FlowConfig, ...]:
        return tuple(f for f in self.flows if f.enabled)

    def selected_flows(self, names: Sequence[str] | None) -> list[FlowConfig]:
        """The named flows (``ConfigError`` for an unknown one), or every enabled flow when none is named."""
        return [self.flow(name) for name in names] if names else list(self.enabled_flows())


def _describe(error: ErrorDetails) -> str:
    loc = ".".join(str(part) for part in error["loc"]) or "<top level>"
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"{loc}: unknown key"
    if kind == "missing":
        return f"{loc}: required key is missing"
    message = str(error["msg"]).removeprefix("Value error, ")
    if not error["loc"] and kind == "value_error":
        return message  # a check across keys: its message names them
    got = error.get("input")
    if isinstance(got, (str, int, float, bool)) and kind != "value_error":
        return f"{loc}: {message} (got {got!r})"
    return f"{loc}: {message}"


def parse_config(data: Any, *, source: str = "<config>") -> MirrorlakeConfig:
    """Validate an already-parsed document; ``source`` names it in error messages."""
    if data is None:
        raise ConfigError(f"{source}: the file is empty (expected a mapping with at least 'clusters')")
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        return MirrorlakeConfig.model_validate(data)
    except ValidationError as exc:
        problems = [_describe(e) for e in exc.errors(include_url=False)]
        if len(problems) == 1:  # one line, file and key first
            raise ConfigError(f"{source}: invalid configuration: {problems[0]}") from None
        listed = "\n  ".join(problems)
        raise ConfigError(f"{source}: invalid configuration:\n  {listed}") from None
