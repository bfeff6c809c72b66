"""The lakehouse build runs unchanged on a real Spark cluster and gives the same gold tables.

A standalone master and two workers are started on 127.0.0.1 from the pyspark package itself
(``spark-class ...Master`` / ``...Worker``), like any Spark cluster; ``mirrorlake lakehouse build``
then runs in its own process with ``spark.master = spark://...``, reading the same state topic as
the session's local[2] build (``built``), into a lakehouse of its own. Every gold table must equal
the local one. The processes are stopped by PID.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from lakehouse.api import Lakehouse
from lakehouse.catalog import GOLD_TABLE_NAMES
from mirrorlake.localkafka.ports import find_free_port_pair
from tests.lakehouse_support import Built
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
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as response:
            return int(json.load(response).get("aliveworkers", 0))
    except OSError:
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
        for i in range(2):
            worker_ui = find_free_port_pair({port, ui})
            procs.append(
                _spark_class(
                    "org.apache.spark.deploy.worker.Worker",
                    master_url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(worker_ui),
                    "--work-dir",
                    str(work / f"worker-{i}"),
                    log=work / f"worker-{i}.log",
                    env=env,
                )  # fmt: skip
            )
        wait_for(lambda: _alive_workers(ui) == 2, "two workers registered with the standalone master", 120)
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


def _rows(root: Path, table: str) -> list[tuple]:
    arrow = Lakehouse.at(root).table(table)
    names = sorted(arrow.column_names)
    return sorted(tuple(str(row[n]) for n in names) for row in arrow.to_pylist())


def test_a_build_on_a_standalone_cluster_equals_the_local_build(built: Built, standalone_cluster, tmp_path):
    root = tmp_path / "lake-on-cluster"
    config = tmp_path / "cluster.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "clusters": {a: {"bootstrap_servers": c.bootstrap_servers} for a, c in built.config.clusters.items()},
                "flows": [{"source": "A", "target": "B", "topics": ["orders"]}],
                "state_topic": built.config.state_topic,
                "lakehouse": {"path": str(root)},
                "spark": {
                    "master": standalone_cluster,
                    "conf": {"spark.executor.memory": "512m", "spark.cores.max": "2", "spark.driver.memory": "1g"},
                },
            }
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", "lakehouse", "build", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    local = built.config.lakehouse.path.resolve()
    for table in GOLD_TABLE_NAMES:
        assert _rows(root, table) == _rows(local, table), table
