"""Spark's packages resolve with mirrorlake's ivy settings: Maven Central only, ivy's output in a log file.

The session fixture reuses the resolved-jar manifest (no ivy run), so this test resolves once more
in a child process whose cache directory has no manifest but shares the real ivy cache (no
download when the jars are there already), with a small driver.
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


def _empty_cache_on_the_shared_ivy(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose mirrorlake cache is ``tmp_path`` (no manifest) over the real ivy cache."""
    shared = cache_root() / "ivy" / "cache"
    shared.mkdir(parents=True, exist_ok=True)
    (tmp_path / "ivy").mkdir()
    (tmp_path / "ivy" / "cache").symlink_to(shared)
    return {**os.environ, "MIRRORLAKE_CACHE": str(tmp_path)}, Path(__file__).parent.parent


def test_packages_resolve_from_maven_central_with_the_output_in_a_log(tmp_path: Path):
    env, root = _empty_cache_on_the_shared_ivy(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD], cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    screen = done.stdout.splitlines()
    assert [line for line in screen if line.startswith("resolving ")] == [
        f"resolving {p} from Maven Central (ivy's output: {tmp_path / 'ivy' / 'resolve.log'})" for p in spark_packages()
    ]
    jars = next(line for line in screen if line.startswith("JARS=")).removeprefix("JARS=").split(",")
    assert any("delta-spark" in j for j in jars) and any("spark-sql-kafka" in j for j in jars)
    assert (tmp_path / "ivy" / "ivysettings.xml").read_text() == IVY_SETTINGS
    log = (tmp_path / "ivy" / "resolve.log").read_text()
    assert "ivysettings.xml" in log and "spark-packages" not in log  # ivy's chatter went to the log, not the screen
    assert "spark-packages" not in done.stderr and "::" not in done.stderr
    assert MAVEN_CENTRAL in IVY_SETTINGS
    assert len(screen) <= len(spark_packages()) + 3  # one line per dependency step, nothing of ivy


def test_two_first_starts_at_once_resolve_once_and_both_run(tmp_path: Path):
    """Two sessions started together on an empty cache (two test workers on a fresh machine, two
    builds): one resolves under the lock, the other waits and starts from the jars it recorded."""
    env, root = _empty_cache_on_the_shared_ivy(tmp_path)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )  # fmt: skip
        for _ in range(2)
    ]
    outputs = [child.communicate(timeout=600) for child in children]
    assert [child.returncode for child in children] == [0, 0], [err[-2000:] for _out, err in outputs]
    resolving = [sum(line.startswith("resolving ") for line in out.splitlines()) for out, _err in outputs]
    assert sorted(resolving) == [0, len(spark_packages())]
    jars = [next(line for line in out.splitlines() if line.startswith("JARS=")) for out, _err in outputs]
    assert jars[0].removeprefix("JARS=").split(",") and all("delta-spark" in j for j in jars)
