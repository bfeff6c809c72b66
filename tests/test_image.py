"""The replicator's and the lakehouse's container images, run for real (issue 35 item 3): ``make image-test``.

Not part of ``make test`` (building the image takes minutes beyond CI's budget): ``make image``
builds ``localhost/mirrorlake:latest`` and ``make image-test`` runs this module against it, with
the session's clusters on the host network. The image replicates between two host clusters,
``/health`` answers, ``podman stop`` (SIGTERM) ends it with exit 0 after its final syncs and
its ``stopped`` lifecycle event, and the target then holds every record of the source, by content.
It runs as a non-root user, its entrypoint is ``mirrorlake``, and it holds no Java runtime. The
lakehouse image (``make image-lakehouse``) holds Java 17 and Spark's jars, recorded as resolved, and
its ``lakehouse build`` gives every gold table the rows a build on the host gives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from mirrorlake.groundtruth import read_partition
from mirrorlake.localkafka.ports import find_free_port_pair
from mirrorlake.traffic import ensure_topic
from replicator.client.state_reader import read_state_log
from replicator.events import Lifecycle
from tests.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.image]
ROOT = Path(__file__).resolve().parents[1]
IMAGE = os.environ.get("MIRRORLAKE_IMAGE", "localhost/mirrorlake:latest")
LAKEHOUSE_IMAGE = os.environ.get("MIRRORLAKE_LAKEHOUSE_IMAGE", "localhost/mirrorlake-lakehouse:latest")
ENV = {**os.environ, "CONTAINERS_CONF": str(ROOT / "deploy" / "image" / "containers.conf")}


def _healthy(port: int) -> bool:
    """``/health`` on 127.0.0.1:``port`` answers 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def _podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, env=ENV, check=False)


@pytest.fixture(scope="module")
def image() -> str:
    found = _podman("image", "inspect", IMAGE)
    assert found.returncode == 0, f"no image {IMAGE}: run `make image` first ({found.stderr.strip()})"
    return IMAGE


@pytest.fixture(scope="module")
def lakehouse_image() -> str:
    found = _podman("image", "inspect", LAKEHOUSE_IMAGE)
    assert found.returncode == 0, (
        f"no image {LAKEHOUSE_IMAGE}: run `make image-lakehouse` first ({found.stderr.strip()})"
    )
    return LAKEHOUSE_IMAGE


def test_the_image_runs_as_a_non_root_mirrorlake_without_java(image):
    (inspected,) = json.loads(_podman("image", "inspect", image).stdout)
    assert inspected["Config"]["User"] == "10001:10001"
    assert inspected["Config"]["Entrypoint"] == ["/opt/mirrorlake/bin/mirrorlake"]
    version = _podman("run", "--rm", image, "--help")
    assert version.returncode == 0 and "replicate" in version.stdout, version.stderr
    java = _podman("run", "--rm", "--entrypoint", "sh", image, "-c", "command -v java")
    assert java.returncode != 0 and java.stdout == ""


def test_the_image_replicates_between_host_clusters_and_stops_cleanly_on_sigterm(image, kafka_clusters, tmp_path):
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = f"image-{uuid.uuid4().hex[:8]}"
    ensure_topic(a, topic, 2)
    state_topic = f"mirrorlake.image-{uuid.uuid4().hex[:8]}"
    port = find_free_port_pair(set())
    config = {
        "clusters": {"A": {"bootstrap_servers": a}, "B": {"bootstrap_servers": b}},
        "flows": [{"source": "A", "target": "B", "topics": [topic], "emit_heartbeats": False}],
        "state_topic": state_topic,
        "heartbeats_topic": f"heartbeats-{uuid.uuid4().hex[:8]}",
        "replicator_id": "image-test",
    }
    path = tmp_path / "mirrorlake.yaml"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o644)
    name = f"mirrorlake-image-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": a, "enable.idempotence": True, "linger.ms": 5})
    for i in range(500):
        producer.produce(topic, key=f"k{i}".encode(), value=b"v" * 50, partition=i % 2)
    assert producer.flush(60) == 0
    started = _podman(
        "run", "--detach", "--name", name, "--network=host", "-v", f"{path}:/etc/mirrorlake/mirrorlake.yaml:ro",
        image, "replicate", "/etc/mirrorlake/mirrorlake.yaml", "--status-port", str(port), "--status-host", "127.0.0.1",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:
        wait_for(lambda: _healthy(port), "/health answering 200 from the container")
        wanted = {f"k{i}".encode() for i in range(500)}

        def copied() -> bool:
            if f"A.{topic}" not in AdminClient({"bootstrap.servers": b}).list_topics(timeout=10).topics:
                return False
            return {r.key for p in (0, 1) for r in read_partition(b, f"A.{topic}", p)} >= wanted

        wait_for(copied, "every record on B")
        stopped = _podman("stop", "--time", "60", name, timeout=90)
        assert stopped.returncode == 0, stopped.stderr
        (state,) = json.loads(_podman("inspect", name).stdout)
        assert state["State"]["ExitCode"] == 0, _podman("logs", name).stderr[-3000:]
    finally:
        _podman("rm", "--force", name)
    for p in (0, 1):
        on_a = [r.key for r in read_partition(a, topic, p)]
        on_b = [r.key for r in read_partition(b, f"A.{topic}", p)]
        assert on_b == on_a
    events = read_state_log({"bootstrap.servers": b}, state_topic).events
    lifecycle = [e.state for e in events if isinstance(e, Lifecycle) and e.replicator_id == "image-test"]
    assert lifecycle[-1] == "stopped", lifecycle


def test_the_replicator_deployment_runs_with_podman_kube_play(image, kafka_clusters, tmp_path):
    """``deploy/kubernetes``'s ConfigMap and replicator Deployment as ``podman kube play`` runs them, with
    what a laptop needs changed only: the config names the host's clusters, the pod uses the host's
    network (and a free status port), no Secret (the clusters are PLAINTEXT), one replica, the local
    image. The pod copies every record, ``/health`` answers on the status port, ``kube down`` stops it."""
    a, b = kafka_clusters.bootstrap("A"), kafka_clusters.bootstrap("B")
    topic = f"kube-{uuid.uuid4().hex[:8]}"
    ensure_topic(a, topic, 1)
    producer = Producer({"bootstrap.servers": a, "enable.idempotence": True, "linger.ms": 5})
    for i in range(200):
        producer.produce(topic, key=f"k{i}".encode(), value=b"v")
    assert producer.flush(60) == 0
    port = find_free_port_pair(set())
    docs = {d["kind"]: d for d in yaml.safe_load_all((ROOT / "deploy/kubernetes/config.yaml").read_text())}
    config_map = docs["ConfigMap"]
    config = {
        "clusters": {"A": {"bootstrap_servers": a}, "B": {"bootstrap_servers": b}},
        "flows": [{"source": "A", "target": "B", "topics": [topic], "emit_heartbeats": False}],
        "state_topic": f"mirrorlake.kube-{uuid.uuid4().hex[:8]}",
        "heartbeats_topic": f"heartbeats-{uuid.uuid4().hex[:8]}",
        "status_port": port,
    }
    config_map["data"]["mirrorlake.yaml"] = yaml.safe_dump(config)
    (deployment,) = yaml.safe_load_all((ROOT / "deploy/kubernetes/replicator.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    deployment["spec"]["replicas"] = 1
    pod["hostNetwork"] = True
    pod["volumes"] = [v for v in pod["volumes"] if "secret" not in v]
    (container,) = pod["containers"]
    container["image"] = image
    container["volumeMounts"] = [m for m in container["volumeMounts"] if m["name"] != "kafka-secrets"]
    container["args"] = [a if a != "8080" else str(port) for a in container["args"]]
    del container["ports"]  # the host's network: podman 4.3 maps no ports there
    for probe in ("readinessProbe", "livenessProbe"):
        container[probe]["httpGet"]["port"] = port
    manifest = tmp_path / "kube.yaml"
    manifest.write_text(yaml.safe_dump_all([config_map, deployment]))
    played = _podman("kube", "play", str(manifest), timeout=180)
    assert played.returncode == 0, played.stderr
    try:
        wait_for(lambda: _healthy(port), "/health of the pod")

        def copied() -> bool:
            if f"A.{topic}" not in AdminClient({"bootstrap.servers": b}).list_topics(timeout=10).topics:
                return False
            return [r.key for r in read_partition(b, f"A.{topic}", 0)] == [f"k{i}".encode() for i in range(200)]

        wait_for(copied, "every record on B, in order")
    finally:
        down = _podman("kube", "down", str(manifest), timeout=180)
    assert down.returncode == 0, down.stderr


def test_the_lakehouse_image_runs_as_a_non_root_mirrorlake_with_java_and_its_spark_jars(lakehouse_image):
    (inspected,) = json.loads(_podman("image", "inspect", lakehouse_image).stdout)
    assert inspected["Config"]["User"] == "10001:10001"
    assert inspected["Config"]["Entrypoint"] == ["/opt/mirrorlake/bin/mirrorlake"]
    java = _podman("run", "--rm", "--entrypoint", "java", lakehouse_image, "-version")
    assert java.returncode == 0 and "17." in java.stderr, java.stderr
    shipped = _podman(
        "run", "--rm", "--entrypoint", "python3", lakehouse_image, "-c",
        "import deltalake, duckdb, streamlit  # the dashboard's and the incremental gold's\n"
        "from ingest.spark import resolved_jars, spark_packages; print(len(resolved_jars()), len(spark_packages()))",
    )  # fmt: skip
    assert shipped.returncode == 0, shipped.stderr
    jars, packages = map(int, shipped.stdout.split())
    assert jars > packages  # the packages and their dependencies, recorded as resolved: no ivy in a pod


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory the image's user (10001) can reach and write (pytest's tmp_path is its owner's only)."""
    with tempfile.TemporaryDirectory(prefix="mirrorlake-image-") as name:
        path = Path(name)
        path.chmod(0o755)
        yield path


def test_the_lakehouse_image_builds_the_gold_tables_a_host_build_does(lakehouse_image, kafka_clusters, shared_dir):
    """The events of the lakehouse tests' four rounds in a state topic of this test's own; ``lakehouse
    build`` on the host and in the image (host network, the lakehouse directory mounted at the same path,
    so one config serves both) give the same rows in every gold table."""
    from lakehouse.api import Lakehouse
    from lakehouse.catalog import GOLD_TABLE_NAMES
    from tests import lakehouse_support as ev
    from tests.test_spark_cluster import _gold

    b = kafka_clusters.bootstrap("B")
    state_topic = f"mirrorlake.image-lake-{uuid.uuid4().hex[:8]}"
    ensure_topic(b, state_topic, 2)
    ev.produce(b, state_topic, [e for events in ev.rounds() for e in events])
    roots = {where: shared_dir / f"lake-{where}" for where in ("host", "image")}
    configs = {}
    for where, root in roots.items():
        root.mkdir()
        root.chmod(0o777)  # the image's user (10001) writes it
        spark = {"master": "local[2]", "conf": {"spark.driver.memory": "1g"}}
        configs[where] = ev.write_config(
            shared_dir / f"{where}.yaml", kafka_clusters.bootstraps, state_topic, root, spark
        )
        configs[where].chmod(0o644)
    host = subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", "lakehouse", "build", "-c", str(configs["host"])],
        cwd=ROOT, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert host.returncode == 0, host.stderr[-3000:]
    mount = f"{shared_dir}:{shared_dir}"
    built = _podman(
        "run", "--rm", "--network=host", "-v", mount, lakehouse_image,
        "lakehouse", "build", "-c", str(configs["image"]), timeout=900,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    assert "resolving" not in built.stderr  # the shipped jars, no ivy
    image, host = _gold(Lakehouse.at(roots["image"])), _gold(Lakehouse.at(roots["host"]))
    assert image is not None and host is not None
    for table in GOLD_TABLE_NAMES:
        assert image[table] == host[table], table
