"""The Kubernetes manifests (``deploy/kubernetes``) hold together (issue 35 item 4), offline.

Each built-in resource passes ``kubernetes-validate --strict`` for Kubernetes 1.37 (and a wrong field
fails it: the validator is awake); every container's arguments parse as the mirrorlake command they
run; the ConfigMap's config is a valid mirrorlake config; probes, Service, PodMonitor and Prometheus
annotations point at ports and labels that exist; every pod runs as a non-root user without
privilege escalation; the Grafana ConfigMap is the board in ``dashboards/grafana``.
"""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path
from typing import Any

import click
import kubernetes_validate
import pytest
import yaml

from mirrorlake.cli import cli
from replicator.config import parse_config

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy" / "kubernetes"
VERSION = "1.37"
CRDS = {"PodMonitor"}  # validated by hand below: no schema ships for the Prometheus Operator's kinds


def _documents() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    return [doc for name in kustomization["resources"] for doc in yaml.safe_load_all((DEPLOY / name).read_text())]


def _pods() -> list[tuple[str, dict[str, Any]]]:
    """(resource name, pod template) of every workload."""
    out = []
    for doc in _documents():
        if doc["kind"] == "Deployment":
            out.append((doc["metadata"]["name"], doc["spec"]["template"]))
        elif doc["kind"] == "CronJob":
            out.append((doc["metadata"]["name"], doc["spec"]["jobTemplate"]["spec"]["template"]))
    return out


def test_the_kustomization_lists_every_manifest():
    listed = set(yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"])
    assert listed == {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}


def test_every_resource_passes_strict_validation_and_a_wrong_field_does_not():
    docs = [d for d in _documents() if d["kind"] not in CRDS]
    assert {d["kind"] for d in docs} >= {"Deployment", "CronJob", "Service", "ConfigMap", "PersistentVolumeClaim"}
    for doc in docs:
        kubernetes_validate.validate(doc, VERSION, strict=True)
    wrong = copy.deepcopy(next(d for d in docs if d["kind"] == "Deployment"))
    wrong["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}  # a typo
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong, VERSION, strict=True)


def _parsed(args: list[str]) -> str:
    """The command path ``args`` name, every option parsed as the CLI would (a bad one raises)."""
    command: click.Command = cli
    ctx = command.make_context("mirrorlake", list(args))
    path = []
    while isinstance(command, click.Group):
        with warnings.catch_warnings():  # Click 8.2 keeps the subcommand in protected_args until 9.0
            warnings.simplefilter("ignore", DeprecationWarning)
            tokens = [*ctx.protected_args, *ctx.args]
        name, sub, rest = command.resolve_command(ctx, tokens)
        assert sub is not None and name is not None, args
        path.append(name)
        ctx = sub.make_context(name, rest, parent=ctx)
        command = sub
    return " ".join(path)


def test_every_container_runs_a_mirrorlake_command_that_parses():
    commands = {name: _parsed(c["args"]) for name, pod in _pods() for c in pod["spec"]["containers"]}
    assert commands == {
        "mirrorlake-replicator": "replicate",
        "mirrorlake-observer": "observe",
        "mirrorlake-lakehouse": "lakehouse serve",
        "mirrorlake-lakehouse-build": "lakehouse build",
        "mirrorlake-dashboard": "dashboard",
    }
    with pytest.raises(click.UsageError):
        _parsed(["replicate", "--status-prot", "8080"])  # the check is awake


def test_the_configmap_holds_a_valid_config_and_every_pod_mounts_it():
    config_map = next(
        d for d in _documents() if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "mirrorlake-config"
    )
    config = parse_config(yaml.safe_load(config_map["data"]["mirrorlake.yaml"]), source="config.yaml")
    assert config.status_port == 8080 and [f.name for f in config.flows] == ["A->B"]
    for name, pod in _pods():
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["config"]["configMap"]["name"] == "mirrorlake-config", name
        for container in pod["spec"]["containers"]:
            mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
            # the directory, not a subPath file: podman kube play (4.3) mounts a subPath's whole ConfigMap
            assert mounts["/etc/mirrorlake/config"]["name"] == "config", name
            assert "subPath" not in mounts["/etc/mirrorlake/config"], name
            assert all(m["name"] in volumes for m in container["volumeMounts"]), name


def test_probes_services_and_monitors_point_at_what_exists():
    docs = _documents()
    pods = dict(_pods())
    for name, pod in pods.items():
        for container in pod["spec"]["containers"]:
            ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
            for probe in ("readinessProbe", "livenessProbe"):
                if probe in container:
                    assert container[probe]["httpGet"]["port"] in ports, (name, probe)
    replicator = pods["mirrorlake-replicator"]
    (container,) = replicator["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert container["livenessProbe"]["httpGet"]["path"] == "/metrics"  # a cluster outage is not a restart
    assert replicator["metadata"]["annotations"]["prometheus.io/port"] == str(container["ports"][0]["containerPort"])
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["MIRRORLAKE_STATUS_HOST"] == "0.0.0.0"  # probes come from the kubelet, not localhost
    assert "--status-port" in container["args"]
    (monitor,) = [d for d in docs if d["kind"] == "PodMonitor"]
    labels = replicator["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert [e["port"] for e in monitor["spec"]["podMetricsEndpoints"]] == ["metrics"]
    (service,) = [d for d in docs if d["kind"] == "Service"]
    assert service["spec"]["selector"].items() <= pods["mirrorlake-dashboard"]["metadata"]["labels"].items()


def test_every_pod_runs_as_a_non_root_user_without_privilege_escalation():
    for name, pod in _pods():
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True, name
        for container in pod["spec"]["containers"]:
            assert container["securityContext"]["allowPrivilegeEscalation"] is False, name
            assert container["securityContext"]["capabilities"]["drop"] == ["ALL"], name


def test_the_grafana_configmap_is_the_board():
    (board,) = [d for d in _documents() if d["metadata"]["name"] == "mirrorlake-grafana-dashboard"]
    shipped = json.loads(board["data"]["mirrorlake-replicator.json"])
    assert shipped == json.loads((ROOT / "dashboards" / "grafana" / "mirrorlake-replicator.json").read_text()), (
        "regenerate deploy/kubernetes/grafana-dashboard.yaml from the board (docs/kubernetes.md)"
    )
