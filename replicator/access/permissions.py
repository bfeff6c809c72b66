"""What each flow's principal must be allowed to do, and whether the clusters allow it.

``required_permissions`` (``replicator.access.acl_needs``) lists, per flow, per enabled feature and
per command, every (cluster, resource, operation) the clients use; ``check_permissions`` asks each
cluster, with that flow's own credentials, which of them it grants. It never reads ACLs (that
needs Describe on the cluster, which a least-privileged principal lacks): it asks for the
*authorized operations* of each topic, group and of the cluster (``describe_topics``,
``describe_consumer_groups``, ``describe_cluster`` with ``include_authorized_operations``), and
for topics that do not exist yet it asks for a ``validate_only`` creation. Nothing is created or changed.

A topic the principal cannot describe is reported MISSING for Describe and for every operation
that implies Describe (Read, Write, Alter); its other operations are UNKNOWN. A transactional id
is never probed (initialising one would fence a running flow): its rows are UNKNOWN.

``authorization_failure`` turns an authorization error met at run time into a ``PermissionError``
naming the ACLs to grant.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic

from replicator.access.acl_needs import COMMANDS, Command, Permission, required_permissions
from replicator.client.policy import policy_from_config
from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.errors import ClusterUnreachableError, MissingPermissionError
from replicator.kafka.admin import admin_client
from replicator.kafka.connectivity import wait_for_cluster
from replicator.kafka.errors import AUTHORIZATION_CODES, kafka_error, kafka_error_reason
from replicator.metadata.topics import flow_topic_selector

__all__ = [
    "AUTHORIZATION_CODES",
    "COMMANDS",
    "Command",
    "Permission",
    "PermissionCheck",
    "required_permissions",
    "check_permissions",
    "principal",
    "authorization_failure",
    "naming_missing_acls",
]

_log = logging.getLogger(__name__)
_TIMEOUT_S = 15.0
_COORDINATOR_WAIT_S = 60.0  # a fresh cluster's group coordinator loads __consumer_offsets first
_COORDINATOR_RETRY_S = 0.5
_COORDINATOR_CODES = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError._TIMED_OUT,
    }
)
Status = Literal["OK", "MISSING", "UNKNOWN"]
_RESOURCE_OF_CODE = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "TOPIC",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "GROUP",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "TRANSACTIONAL_ID",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "CLUSTER",
}
# Kafka: Read, Write, Delete and Alter each imply Describe, so without Describe none is granted.
_IMPLY_DESCRIBE = frozenset({"READ", "WRITE", "DELETE", "ALTER", "DESCRIBE"})


@dataclass(frozen=True)
class PermissionCheck:
    permission: Permission
    status: Status
    principal: str
    detail: str = ""

    def grant(self) -> str:
        """The ACL to grant, in ``kafka-acls.sh`` terms."""
        p = self.permission
        kind = f"{p.resource_type} prefix" if p.pattern == "PREFIXED" else p.resource_type
        return f"{self.principal} {_op_name(p.operation)} on {kind} {p.name!r} of cluster {p.cluster}"


def _op_name(operation: str) -> str:
    return "".join(part.capitalize() for part in operation.split("_"))


def principal(conf: dict[str, Any]) -> str:
    """``User:<sasl.username>`` of a client config, or a description when it authenticates otherwise."""
    user = conf.get("sasl.username")
    if user:
        return f"User:{user}"
    protocol = str(conf.get("security.protocol", "plaintext")).upper()
    return "the TLS certificate's principal" if protocol == "SSL" else "User:ANONYMOUS"


def check_permissions(
    config: MirrorlakeConfig,
    flows: Iterable[FlowConfig] | None = None,
    *,
    commands: Sequence[Command] = ("replicate",),
) -> list[PermissionCheck]:
    """Ask every flow's clusters, with its credentials, which permissions ``commands`` need they grant.

    Raises ``ClusterUnreachableError`` (one line naming the cluster) when a cluster does not answer
    within ``connect_timeout_seconds``.
    """
    results: list[PermissionCheck] = []
    for flow in config.enabled_flows() if flows is None else flows:
        results += _check_flow(config, flow, commands)
    return results


def _check_flow(config: MirrorlakeConfig, flow: FlowConfig, commands: Sequence[Command]) -> list[PermissionCheck]:
    confs = {alias: config.cluster(alias).client_config() for alias in (flow.source, flow.target)}
    for alias, conf in confs.items():
        wait_for_cluster(alias, conf, timeout_s=config.connect_timeout_seconds)
    admins = {alias: admin_client(conf) for alias, conf in confs.items()}
    source = admins[flow.source]
    try:
        visible = list(source.list_topics(timeout=_TIMEOUT_S).topics)  # only those it may Describe
    except KafkaException as exc:
        raise ClusterUnreachableError(f"cluster {flow.source}: cannot list topics: {kafka_error_reason(exc)}") from exc
    groups = _visible_groups(source, flow.source) if flow.emit_checkpoints or "failover" in commands else []
    policy = policy_from_config(config.replication_policy)
    selector = flow_topic_selector(config, flow, policy)
    perms = required_permissions(
        config,
        flow,
        source_topics=[t for t in visible if selector.should_replicate(t)],
        source_groups=groups,
        commands=commands,
    )
    out = []
    for alias in (flow.source, flow.target):
        mine = [p for p in perms if p.cluster == alias]
        granted = _Probe(admins[alias]).statuses(mine)
        who = principal(confs[alias])
        out += [PermissionCheck(p, status, who, detail) for p, (status, detail) in zip(mine, granted, strict=True)]
    return out


def _visible_groups(admin: AdminClient, alias: str) -> list[str]:
    """The groups the principal may Describe (all of them with Describe on the cluster)."""
    try:
        listing = admin.list_consumer_groups(request_timeout=_TIMEOUT_S).result(timeout=_TIMEOUT_S + 5)
    except KafkaException as exc:
        err = kafka_error(exc)
        if err is not None and err.code() in AUTHORIZATION_CODES:
            return []
        raise ClusterUnreachableError(f"cluster {alias}: cannot list groups: {kafka_error_reason(exc)}") from exc
    except TimeoutError as exc:
        raise ClusterUnreachableError(f"cluster {alias}: cannot list groups: no answer in time") from exc
    return [g.group_id for g in listing.valid]


class _Probe:
    """Authorized operations of one cluster's resources, asked once per resource."""

    def __init__(self, admin: AdminClient) -> None:
        self._admin = admin

    def statuses(self, perms: list[Permission]) -> list[tuple[Status, str]]:
        names = {kind: sorted({p.probe_name for p in perms if p.resource_type == kind}) for kind in ("TOPIC", "GROUP")}
        topics = self._topics(names["TOPIC"])
        groups = self._groups(names["GROUP"])
        cluster = self._cluster() if any(p.resource_type == "CLUSTER" for p in perms) else None
        creatable = self._creatable([n for n, (ops, _) in topics.items() if ops is None and _ == "absent"])
        out: list[tuple[Status, str]] = []
        for p in perms:
            if p.resource_type == "TOPIC":
                ops, state = topics[p.probe_name]
                if state == "absent":  # the broker hides a topic's absence from a principal without Describe
                    out.append(_absent_topic(p.operation, creatable[p.probe_name]))
                    continue
                out.append(_status(p.operation, ops, state))
            elif p.resource_type == "GROUP":
                ops, state = groups[p.probe_name]
                out.append(_status(p.operation, ops, state))
            elif p.resource_type == "CLUSTER":
                assert cluster is not None
                out.append(_status(p.operation, cluster[0], cluster[1]))
            else:
                out.append(("UNKNOWN", "not probed: initialising a transactional id would fence a running flow"))
        return out

    def _topics(self, names: list[str]) -> dict[str, tuple[set[str] | None, str]]:
        if not names:
            return {}
        futures = self._admin.describe_topics(
            TopicCollection(names), include_authorized_operations=True, request_timeout=_TIMEOUT_S
        )
        return {name: _ops_of(future) for name, future in futures.items()}

    def _groups(self, names: list[str]) -> dict[str, tuple[set[str] | None, str]]:
        """Authorized operations per group; retried while the group coordinator is not there yet."""
        out: dict[str, tuple[set[str] | None, str]] = {}
        deadline = time.monotonic() + _COORDINATOR_WAIT_S
        while names:
            futures = self._admin.describe_consumer_groups(
                names, include_authorized_operations=True, request_timeout=_TIMEOUT_S
            )
            retry = []
            for name, future in futures.items():
                try:
                    out[name] = _ops_of(future)
                except ClusterUnreachableError as exc:
                    if time.monotonic() > deadline or not _coordinator_moving(exc.__cause__):
                        raise
                    retry.append(name)
            names = retry
            if names:
                time.sleep(_COORDINATOR_RETRY_S)
        return out

    def _cluster(self) -> tuple[set[str] | None, str]:
        return _ops_of(self._admin.describe_cluster(include_authorized_operations=True, request_timeout=_TIMEOUT_S))

    def _creatable(self, names: list[str]) -> dict[str, tuple[Status, str]]:
        if not names:
            return {}
        futures = self._admin.create_topics(
            [NewTopic(n, 1, 1) for n in names], validate_only=True, request_timeout=_TIMEOUT_S
        )
        out: dict[str, tuple[Status, str]] = {}
        for name, future in futures.items():
            try:
                future.result(timeout=_TIMEOUT_S)
                out[name] = ("OK", "")
            except KafkaException as exc:
                err = kafka_error(exc)
                code = err.code() if err is not None else None
                if code in AUTHORIZATION_CODES:
                    out[name] = ("MISSING", "")
                elif code == KafkaError.TOPIC_ALREADY_EXISTS:
                    out[name] = ("OK", "")
                else:  # e.g. a replication factor the cluster cannot meet: the ACL check passed
                    out[name] = ("OK", f"validation said: {err.str() if err else exc}")
        return out


def _coordinator_moving(exc: BaseException | None) -> bool:
    if isinstance(exc, TimeoutError):  # the first group request of a cluster creates __consumer_offsets
        return True
    err = kafka_error(exc) if exc is not None else None
    return err is not None and (err.code() in _COORDINATOR_CODES or bool(err.retriable()))


def _ops_of(future: Future[Any]) -> tuple[set[str] | None, str]:
    """(authorized operation names, "") or (None, "denied" | "absent")."""
    try:
        result = future.result(timeout=_TIMEOUT_S + 5)
    except TimeoutError as exc:
        raise ClusterUnreachableError(f"cannot describe resources: no answer within {_TIMEOUT_S + 5:.0f} s") from exc
    except KafkaException as exc:
        err = kafka_error(exc)
        code = err.code() if err is not None else None
        if code in AUTHORIZATION_CODES:
            return None, "denied"
        if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
            return None, "absent"
        reason = f"{err.name()} {err.str()}" if err is not None else str(exc)
        raise ClusterUnreachableError(f"cannot describe resources: {reason}") from exc
    ops = result.authorized_operations
    if ops is None:
        return None, "not reported"
    names = {op.name for op in ops}
    if "ALL" in names:
        names |= {op.name for op in AclOperation}
    return names, ""


def _absent_topic(operation: str, create: tuple[Status, str]) -> tuple[Status, str]:
    if operation == "CREATE":
        return create
    if operation == "DESCRIBE":
        return "OK", ""
    return "UNKNOWN", "topic does not exist yet"


def _status(operation: str, ops: set[str] | None, state: str) -> tuple[Status, str]:
    if ops is not None:
        if operation in ops or (operation == "DESCRIBE_CONFIGS" and "ALTER_CONFIGS" in ops):
            return "OK", ""
        return "MISSING", ""
    if state == "denied":
        return ("MISSING", "Describe denied") if operation in _IMPLY_DESCRIBE else ("UNKNOWN", "Describe denied")
    return "UNKNOWN", f"authorized operations {state}"


def authorization_failure(
    config: MirrorlakeConfig, flow: FlowConfig, exc: BaseException, commands: Sequence[Command] = ("replicate",)
) -> MissingPermissionError | None:
    """A ``MissingPermissionError`` naming the ACLs to grant if ``exc`` is an authorization error, else None.

    The ACLs are found by checking the flow's permissions now: the MISSING ones, or if none, the
    UNKNOWN ones of the kind the broker refused (a transactional id is never probed: the refusal is
    the answer). If the check cannot run, the error names the kind of resource refused.
    """
    err = _authorization_error(exc)
    if err is None:
        return None
    what = f"flow {flow.name}" if tuple(commands) == ("replicate",) else f"{', '.join(commands)} of flow {flow.name}"
    reason = f"{what}: not authorized ({err.str()})"
    kind = _RESOURCE_OF_CODE[err.code()]
    try:
        checks = check_permissions(config, [flow], commands=commands)
    except (KafkaException, ClusterUnreachableError, TimeoutError) as check_exc:
        _log.debug("flow %s: permission check after an authorization error failed: %s", flow.name, check_exc)
        checks = []
    missing = [c for c in checks if c.status == "MISSING"]
    if not missing:  # e.g. a transactional id, which the check cannot probe: the broker just did
        missing = [c for c in checks if c.status == "UNKNOWN" and c.permission.resource_type == kind]
    if missing:
        grants = "; ".join(f"{c.grant()} ({c.permission.feature})" for c in missing)
        return MissingPermissionError(f"{reason}; grant: {grants}")
    return MissingPermissionError(
        f"{reason}; grant the flow's principals the {kind} ACLs listed by 'mirrorlake check' "
        "(see Least privilege in docs/reliability-and-security.md)"
    )


def _authorization_error(exc: BaseException | None) -> KafkaError | None:
    seen = 0
    while exc is not None and seen < 10:
        err = kafka_error(exc)
        if err is None and exc.args and isinstance(exc.args[0], KafkaError):
            err = exc.args[0]
        if err is not None and err.code() in AUTHORIZATION_CODES:
            return err
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


@contextmanager
def naming_missing_acls(config: MirrorlakeConfig, flows: Sequence[FlowConfig], command: Command) -> Iterator[None]:
    """Inside, an authorization error becomes a ``MissingPermissionError`` naming what ``command`` lacks.

    For the operator's commands (``failover``, ``translate``, ``import-mm2``, ``observe``): a
    refusal met at run time ends the command with the ACLs to grant, checked with each flow's own
    credentials at that moment (the first flow that lacks one names it), instead of a traceback or
    a generic error.
    """
    try:
        yield
    except MissingPermissionError:
        raise
    except Exception as exc:
        failures = [f for flow in flows if (f := authorization_failure(config, flow, exc, commands=(command,)))]
        if not failures:
            raise
        raise next((f for f in failures if "; grant: " in str(f)), failures[0]) from exc
