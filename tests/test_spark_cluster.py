"""``lakehouse build`` runs unchanged on a real Spark cluster, with the lakehouse on S3, and
``lakehouse serve`` carries that lakehouse on: both give the same gold tables as the local build.

A standalone master and a worker (two cores: one executor of two) are started on 127.0.0.1 from
the pyspark package itself (``spark-class ...Master`` / ``...Worker``), like any Spark cluster, and
stopped by PID. The lakehouse is ``s3://<bucket>/lake`` on moto's S3 API server
(``tests.s3_support``), the place the executor and every driver reach. The lakehouse tests' rounds
of events (``rounds()``) go to a state topic of this test's own, round by round: ``mirrorlake
lakehouse build`` on the cluster (``spark.master = spark://...``: the Kafka source and the Delta
writes to S3 run on the executor) builds round 1 from scratch; then ``mirrorlake lakehouse serve``
on local[2] shows rounds 2-4 in the same S3 lakehouse, produced after its first refresh, without a
restart (its refreshes run no Spark job: bronze from a Kafka consumer, silver and gold increments on
the DuckDB/delta-rs twins, on S3 too; on the cluster it only started two more executors that did
nothing), until every gold table equals a local[2] ``mirrorlake lakehouse build`` of the same events
on a local directory (a process of its own, run beside the cluster's build: this module then needs
no session Spark and runs on a worker beside the Spark unit, not after it); it stops cleanly on
SIGTERM. Meanwhile a second build is refused, naming serve, and leaves the lakehouse whole. Then
``mirrorlake sql`` and the dashboard read the S3 lakehouse, and ``maintain`` (local[2]) compacts it.
Waits are polls with a bound, never timing assertions.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.polling import get_whole
from lakehouse.api import Lakehouse
from lakehouse.catalog import GOLD_TABLE_NAMES
from lakehouse.sql import LakehouseSQL
from mirrorlake.localkafka.ports import find_free_port_pair
from mirrorlake.traffic import ensure_topic
from replicator.config import load_config
from replicator.errors import ExitCode, MirrorlakeError
from tests import lakehouse_support as ev
from tests.s3_support import S3Server
from tests.waiting import wait_for

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def _spark_class(*args: str, log: Path, env: dict[str, str]) -> subprocess.Popen:
    import pyspark

    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    return subprocess.Popen(
        [str(spark_class), *args],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,  # its own process group: stopped with everything it started
    )


def _alive_workers(ui_port: int) -> int:
    reply = get_whole(f"http://127.0.0.1:{ui_port}/json/")
    try:
        return int(json.loads(reply[1]).get("aliveworkers", 0)) if reply and reply[0] == 200 else 0
    except ValueError:  # a page that is not the master's JSON yet
        return 0


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory) -> Iterator[str]:
    import pyspark

    work = tmp_path_factory.mktemp("spark-standalone")
    env = {
        **os.environ,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOG_DIR": str(work),
    }
    port, ui = find_free_port_pair(), find_free_port_pair()
    master_url = f"spark://127.0.0.1:{port}"
    master_args = ("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui))
    procs = [_spark_class("org.apache.spark.deploy.master.Master", *master_args, log=work / "master.log", env=env)]
    try:
        # one worker of two cores (two workers of one cost a JVM more, and an executor more per application)
        worker_ui = find_free_port_pair({port, ui})
        worker_args = ("--host", "127.0.0.1", "--cores", "2", "--memory", "1g", "--webui-port", str(worker_ui))
        worker_args += ("--work-dir", str(work / "worker"))
        worker = "org.apache.spark.deploy.worker.Worker"
        procs.append(_spark_class(worker, master_url, *worker_args, log=work / "worker.log", env=env))
        wait_for(lambda: _alive_workers(ui) == 1, "the worker registered with the standalone master", 120)
        yield master_url
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _gold(lake: Lakehouse) -> dict[str, list[tuple]] | None:
    """Every gold table's rows (one DuckDB connection: on S3 each opening lists every table's log),
    or None while one does not exist yet."""
    try:
        sql = LakehouseSQL(lake.paths.root)
    except MirrorlakeError:
        return None
    try:
        if not set(GOLD_TABLE_NAMES) <= set(sql.views):
            return None
        out = {}
        for table in GOLD_TABLE_NAMES:
            arrow = sql.arrow(f"SELECT * FROM {table}")
            names = sorted(arrow.column_names)
            out[table] = sorted(tuple(str(row[n]) for n in names) for row in arrow.to_pylist())
        return out
    finally:
        sql.close()


def _cli(*args: str, log: Path) -> subprocess.Popen:
    """``mirrorlake *args`` in a process of its own: stdout piped, stderr (its log) to ``log``."""
    with log.open("w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "mirrorlake.cli", *args], stdout=subprocess.PIPE, stderr=err, text=True
        )


def _local_build(kafka_clusters, unique_topic, tmp_path: Path, rounds: list[list]) -> tuple[subprocess.Popen, Path]:
    """Start ``mirrorlake lakehouse build`` on local[2] of every round at once, on a local directory:
    the reference (an incremental build equals a clean one: tests/test_lakehouse_incremental.py)."""
    state_topic = unique_topic("mirrorlake.events")
    b = kafka_clusters.bootstrap("B")
    ensure_topic(b, state_topic, 2)
    ev.produce(b, state_topic, [event for events in rounds for event in events])
    conf = ev.write_config(tmp_path / "local.yaml", kafka_clusters.bootstraps, state_topic, tmp_path / "local-lake")
    return _cli("lakehouse", "build", "--config", str(conf), log=tmp_path / "local-build.log"), conf


# beside the Spark unit it took up to 686 s in CI (367 s alone): its own waits are bounded (600 s each)
@pytest.mark.timeout(1800)
def test_build_then_serve_on_a_standalone_cluster_and_s3_equal_the_local_build(
    standalone_cluster, kafka_clusters, unique_topic, tmp_path, s3_server: S3Server, s3_bucket: str, monkeypatch
):  # fmt: skip
    lakehouse = s3_server.lakehouse(f"s3://{s3_bucket}/lake")
    rounds = ev.rounds()
    reference, reference_conf = _local_build(kafka_clusters, unique_topic, tmp_path, rounds)
    state_topic = unique_topic("mirrorlake.events")
    b = kafka_clusters.bootstrap("B")
    ensure_topic(b, state_topic, 2)
    spark = {
        "master": standalone_cluster,
        "conf": {
            "spark.executor.memory": "512m",
            "spark.cores.max": "2",
            "spark.driver.memory": "1g",
            # a task preferring a busy core (the Kafka source's partitions, the streams' state) must
            # not wait 3 s (Spark's default) for it while another is idle
            "spark.locality.wait": "0s",
            # as the driver (SMALL_DATA_SPARK_CONF): no concurrent GC threads on 2 busy cores
            "spark.executor.extraJavaOptions": "-XX:+UseSerialGC",
        },
    }
    conf = ev.write_config(tmp_path / "cluster.yaml", kafka_clusters.bootstraps, state_topic, lakehouse, spark)
    # serve and maintain: the same lakehouse and state topic, Spark in their own process (local[2])
    local_spark = {"master": "local[2]", "conf": {"spark.driver.memory": "1g"}}
    local_conf = ev.write_config(
        tmp_path / "on-s3-local.yaml", kafka_clusters.bootstraps, state_topic, lakehouse, local_spark
    )
    on_s3 = Lakehouse(load_config(conf))
    first, *while_serving = rounds

    ev.produce(b, state_topic, first)
    build_log = tmp_path / "build.log"
    build = _cli("lakehouse", "build", "--config", str(conf), log=build_log)
    build.communicate(timeout=600)
    assert build.returncode == 0, build_log.read_text()[-3000:]
    reference.communicate(timeout=600)
    assert reference.returncode == 0, (tmp_path / "local-build.log").read_text()[-3000:]
    local = _gold(Lakehouse(load_config(reference_conf)))
    assert local is not None
    built_on_cluster = _gold(on_s3)
    assert built_on_cluster is not None and built_on_cluster != local  # round 1 only

    serve_log = tmp_path / "serve.log"
    # 10 s between refreshes: the rounds produced after the first refresh reach bronze before the
    # second starts, so the SIGTERM comes during that refresh (which serve finishes first) or the
    # wait after it, not during a third
    serve = _cli("lakehouse", "serve", "-c", str(local_conf), "--interval", "10", log=serve_log)
    try:
        wait_for(
            lambda: serve.poll() is not None or "refresh 1:" in serve_log.read_text(), "serve's first refresh", 600, 1.0
        )
        assert serve.poll() is None, serve_log.read_text()[-3000:]
        # rounds 2-4, the last of events seen before, produced while serve runs: they must show up
        # without a restart, and the repeated events must change nothing
        for events in while_serving:
            ev.produce(b, state_topic, events)
        # a second writer meanwhile: refused at once, naming serve, before its Spark starts (asked
        # while serve ingests the rounds, rather than after: its start overlaps serve's refresh)
        second = subprocess.run(
            [sys.executable, "-m", "mirrorlake.cli", "lakehouse", "build", "-c", str(conf), "--wait", "0"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert second.returncode == ExitCode.LAKEHOUSE_BUSY, second.stderr
        assert "`lakehouse serve`" in second.stderr and "is writing this lakehouse" in second.stderr
        assert "Traceback" not in second.stderr and "start Spark" not in second.stdout + second.stderr

        # gold changes only in a refresh: read it (every table, over S3, through the one S3 server
        # serve also writes to) once per refresh that serve logs, not every 2 s while it refreshes
        compared: list[int] = []

        def shows_the_local_build() -> bool:
            if serve.poll() is not None:
                return True
            refreshes = serve_log.read_text().count(" INFO lakehouse.serve: refresh ")
            if compared and compared[-1] == refreshes:
                return False  # no refresh ended since the last comparison
            compared.append(refreshes)
            return _gold(on_s3) == local

        wait_for(shows_the_local_build, "the local build's gold", 600, 0.5)
        assert serve.poll() is None, serve_log.read_text()[-3000:]
        serve.send_signal(signal.SIGTERM)
        out, _ = serve.communicate(timeout=300)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    assert serve.returncode == 0, serve_log.read_text()[-3000:]
    assert "lakehouse serve stopped after" in out
    assert "Traceback" not in serve_log.read_text()
    assert " on duckdb " in serve_log.read_text()  # the increments ran on the twins, against S3
    assert _gold(on_s3) == local
    keys = s3_server.keys(s3_bucket)
    assert any(k.startswith("lake/checkpoints/bronze-") for k in keys)  # the stream's checkpoint on S3 too
    assert s3_server.keys(s3_bucket, "lake/leases/") == []  # serve let go of the writer lease

    # the readers: mirrorlake sql (now and as of version 0) and the dashboard
    got = subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", "sql", "SELECT count(*) AS n FROM offset_mapping", "-c", str(conf),
         "--format", "csv"], capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    assert got.stdout.splitlines() == ["n", str(len(local["offset_mapping"]))]
    then = subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", "sql", "SELECT count(*) FROM rpo", "-c", str(conf), "--as-of", "0"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert then.returncode == 0, then.stderr
    # maintain on S3 (OPTIMIZE, VACUUM at the safe retention): the tables read the same after it
    maintain = subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", "lakehouse", "maintain", "-c", str(local_conf)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert maintain.returncode == 0, maintain.stderr[-3000:]
    assert "offset_mapping:" in maintain.stdout
    assert _gold(on_s3) == local
    for said in (got, then, second, maintain):
        assert s3_server.secret not in said.stdout + said.stderr
    for log in (build_log, serve_log):
        assert s3_server.secret not in log.read_text()
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("MIRRORLAKE_CONFIG", str(conf))
    app = AppTest.from_file(str(Path(__file__).parent.parent / "dashboards" / "app.py"), default_timeout=120)
    app.run()
    assert not app.exception, app.exception
    assert [t.value for t in app.title] == ["Overview"]
    assert any(m.value.startswith("**A->B**") for m in app.markdown)
