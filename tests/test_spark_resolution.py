"""Spark's packages resolve with mirrorlake's ivy settings: Maven Central only, ivy's output in a log file.

The session fixture reuses the resolved-jar manifest (no ivy run), so this test resolves once more
in two child processes started at once, whose cache directory has no manifest but shares the real
ivy cache (no download when the jars are there already), with a small driver each.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.spark import IVY_SETTINGS, MAVEN_CENTRAL, spark_packages
from replicator.config.cache import cache_root

pytestmark = pytest.mark.spark

_CHILD = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
from ingest.spark import spark_session
from replicator.config import SparkConfig
spark = spark_session(SparkConfig(master="local[1]", conf={"spark.driver.memory": "512m"}), app_name="resolve")
print("JARS=" + spark.sparkContext.getConf().get("spark.jars", ""))
spark.stop()
"""


def test_two_first_starts_at_once_resolve_once_with_the_output_in_a_log_and_both_run(tmp_path: Path):
    """Two sessions started together on an empty cache (two builds, two test workers on a fresh
    machine): one resolves under the lock, with ivy's output in the log and one line per package on
    the screen; the other waits and starts from the jars it recorded, resolving nothing."""
    shared = cache_root() / "ivy" / "cache"
    shared.mkdir(parents=True, exist_ok=True)
    (tmp_path / "ivy").mkdir()
    (tmp_path / "ivy" / "cache").symlink_to(shared)
    env = {**os.environ, "MIRRORLAKE_CACHE": str(tmp_path)}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD],
            cwd=Path(__file__).parent.parent,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(2)
    ]
    outputs = [child.communicate(timeout=600) for child in children]
    assert [child.returncode for child in children] == [0, 0], [err[-2000:] for _out, err in outputs]
    screens = [out.splitlines() for out, _err in outputs]
    resolving = [[line for line in screen if line.startswith("resolving ")] for screen in screens]
    assert sorted(len(r) for r in resolving) == [0, len(spark_packages())]
    (resolver,) = [i for i in (0, 1) if resolving[i]]
    assert resolving[resolver] == [
        f"resolving {p} from Maven Central (ivy's output: {tmp_path / 'ivy' / 'resolve.log'})" for p in spark_packages()
    ]
    for screen in screens:
        jars = next(line for line in screen if line.startswith("JARS=")).removeprefix("JARS=").split(",")
        assert any("delta-spark" in j for j in jars) and any("spark-sql-kafka" in j for j in jars)
        assert len(screen) <= len(spark_packages()) + 3  # one line per dependency step, nothing of ivy
    assert (tmp_path / "ivy" / "ivysettings.xml").read_text() == IVY_SETTINGS
    log = (tmp_path / "ivy" / "resolve.log").read_text()
    assert "ivysettings.xml" in log and "spark-packages" not in log  # ivy's chatter went to the log, not the screen
    for _out, err in outputs:
        assert "spark-packages" not in err and "::" not in err
    assert MAVEN_CENTRAL in IVY_SETTINGS
