"""A lakehouse on S3 that cannot be used: one clear error each, before Spark starts, nothing
created on the way (moto's real S3 API server on 127.0.0.1, signatures checked).

The lakehouse built and read on S3 by every engine is ``tests/test_spark_cluster.py``'s (a
standalone Spark cluster, ``serve``'s increments on the DuckDB/delta-rs twins, ``mirrorlake sql``
and the dashboard), held there to the local build of the same events.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.s3_support import S3Server


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", *args],
        capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})},
    )  # fmt: skip


def _config_file(path: Path, clusters: dict, lakehouse: dict, state_topic: str = "mirrorlake.events") -> Path:
    doc = {"clusters": clusters, "state_topic": state_topic, "lakehouse": lakehouse}
    path.write_text(yaml.safe_dump(doc))
    return path


def _offline_config(tmp_path: Path, s3_server: S3Server, path: str, **s3: object) -> Path:
    """A config whose lakehouse is on ``s3_server`` (its clusters are never contacted)."""
    clusters = {"A": {"bootstrap_servers": "127.0.0.1:1"}, "B": {"bootstrap_servers": "127.0.0.1:1"}}
    return _config_file(tmp_path / "bad.yaml", clusters, s3_server.lakehouse(path, **s3))


@pytest.mark.parametrize(
    ("case", "s3", "says"),
    [
        ("wrong secret", {"secret_access_key": "not-the-secret"}, "refused the credentials"),
        ("missing bucket", {}, "bucket does not exist"),
        ("no answer", {"endpoint": "http://127.0.0.1:1"}, "endpoint does not answer"),
    ],
)
@pytest.mark.parametrize("command", ["build", "sql"])
def test_a_store_that_cannot_be_used_is_one_clear_error(
    case: str, s3: dict, says: str, command: str, s3_server: S3Server, s3_bucket: str, tmp_path: Path
):
    bucket = "no-such-bucket-here" if case == "missing bucket" else s3_bucket
    conf = _offline_config(tmp_path, s3_server, f"s3://{bucket}/lake", **s3)
    args = ("lakehouse", "build", "-c", str(conf)) if command == "build" else ("sql", "SELECT 1", "-c", str(conf))
    got = _cli(*args)
    assert got.returncode != 0
    assert says in got.stderr, got.stderr
    assert "Traceback" not in got.stderr, got.stderr
    assert "start Spark" not in got.stdout + got.stderr  # refused before Spark starts
    assert "not-the-secret" not in got.stdout + got.stderr and s3_server.secret not in got.stdout + got.stderr
    if case == "missing bucket":  # not created on the way
        assert "no-such-bucket-here" not in [b["Name"] for b in s3_server.client().list_buckets()["Buckets"]]


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("gs://bucket/lake", "the gs:// scheme is not supported"),
        ("s3://Bad_Bucket/lake", "'Bad_Bucket' is not an S3 bucket name"),
        ("s3://ab/lake", "'ab' is not an S3 bucket name"),
    ],
)
def test_a_lakehouse_path_that_is_no_place_is_refused_by_name(path: str, says: str):
    from replicator.config import parse_config
    from replicator.errors import ConfigError

    with pytest.raises(ConfigError, match=f"lakehouse.path: {re.escape(path)}: {re.escape(says)}"):
        parse_config({"clusters": {"A": {"bootstrap_servers": "x:1"}}, "lakehouse": {"path": path}})


def test_s3a_and_trailing_slashes_name_the_same_place_and_secrets_stay_hidden(monkeypatch):
    from ingest.storage import S3Access
    from replicator.config.model import LakehouseConfig

    monkeypatch.setenv("LAKE_SECRET", "s3cr3t-value")
    config = LakehouseConfig.model_validate(
        {"path": "s3a://lake-bucket/prod/", "s3": {"access_key_id": "AKIA1", "secret_access_key": "${env:LAKE_SECRET}"}}
    )
    assert config.path == "s3://lake-bucket/prod"
    assert "s3cr3t" not in repr(config) and "LAKE_SECRET" not in str(config.s3.secret_access_key)
    access = S3Access.of(config)
    assert access.secret == "s3cr3t-value" and "s3cr3t" not in repr(access)
    assert access.delta_rs_options()["AWS_SECRET_ACCESS_KEY"] == "s3cr3t-value"
    assert access.spark_settings()["fs.s3a.secret.key"] == "s3cr3t-value"
    assert access.region == "us-east-1" and access.path_style is False  # AWS: virtual-hosted, no endpoint
    monkeypatch.delenv("LAKE_SECRET")
    from replicator.errors import ConfigError

    with pytest.raises(ConfigError, match=r"lakehouse.s3.secret_access_key: environment variable LAKE_SECRET"):
        S3Access.of(config)
