"""What a lakehouse on S3 costs against a local one: a full build and an increment, side by side.

Not a test: prints numbers measured in one run, same Spark session, same events. The S3 side is
moto's S3 API server on 127.0.0.1 (started and stopped here): it has a real HTTP round trip
per request and signature checks, but no network latency and no throttling; against AWS each
request costs more, so read the ratio as a floor of S3's request overhead, not as AWS's figure.

    .venv/bin/python -m bench.s3_cost                      # 1e6 events, then 1e5 more
    .venv/bin/python -m bench.s3_cost --events 200000      # a quick look

For each store, on a fresh lakehouse: ``--events`` synthetic events appended to bronze (as
``bench.lakehouse_scale`` does), then silver + every gold table in full (timed), then
``--increment`` more on a few partitions and silver + incremental gold (timed: the twins run on
DuckDB and delta-rs), then ``translate_group`` through ``mirrorlake sql``'s DuckDB reader.
The last lines are ``s3_over_local_full=<ratio>`` and ``s3_over_local_increment=<ratio>``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.lakehouse_scale import append_bronze, lakehouse_config
from bench.measure import load_average

_log = logging.getLogger("bench.s3_cost")
_BUCKET = "bench-lakehouse"


@contextmanager
def moto_server(work: Path) -> Iterator[dict[str, str]]:
    """moto's S3 server with one IAM user (signatures checked): the config's ``lakehouse.s3`` block."""
    import boto3

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    exe = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or "moto_server"
    log = (work / "moto.log").open("w")
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "3"}  # the three requests that make the user
    proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log, env=env)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        iam = boto3.client("iam", endpoint_url=endpoint, aws_access_key_id="x", aws_secret_access_key="x",
                           region_name="us-east-1")  # fmt: skip
        iam.create_user(UserName="bench")
        key = iam.create_access_key(UserName="bench")["AccessKey"]
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(UserName="bench", PolicyName="all", PolicyDocument=json.dumps(policy))
        s3 = {"endpoint": endpoint, "access_key_id": key["AccessKeyId"], "secret_access_key": key["SecretAccessKey"]}
        client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=s3["access_key_id"],
                              aws_secret_access_key=s3["secret_access_key"], region_name="us-east-1")  # fmt: skip
        client.create_bucket(Bucket=_BUCKET)
        yield s3
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _config(path: str, s3: dict[str, str] | None):  # noqa: ANN202 - MirrorlakeConfig (imported after Spark)
    if s3 is None:
        return lakehouse_config(Path(path))
    from replicator.config import parse_config

    doc = {"clusters": {"B": {"bootstrap_servers": "127.0.0.1:1"}}, "lakehouse": {"path": path, "s3": s3}}
    return parse_config(doc, source="bench")


def _measure(spark, name: str, path: str, s3: dict[str, str] | None, args: argparse.Namespace) -> dict[str, float]:  # noqa: ANN001
    from ingest.paths import LakehousePaths
    from ingest.spark import reach_from_spark
    from lakehouse.build import refresh
    from lakehouse.sql import LakehouseSQL

    config = _config(path, s3)
    paths = LakehousePaths.of(config.lakehouse)
    reach_from_spark(spark, paths.root)
    out = {"bronze": append_bronze(spark, paths, 0, args.events, args.partitions, args.partitions)}
    began = time.monotonic()
    full = refresh(spark, config, paths)
    out["full"] = time.monotonic() - began
    append_bronze(spark, paths, args.events, args.increment, args.partitions, args.touched_partitions)
    began = time.monotonic()
    inc = refresh(spark, config, paths)
    out["increment"] = time.monotonic() - began
    engines = sorted({f"{u.mode} on {u.engine}" for u in inc.gold_updates})
    began = time.monotonic()
    sql = LakehouseSQL(paths.root)  # opening lists and checks every table's Delta log
    try:
        sql.query("SELECT count(*) FROM offset_mapping")
        out["open+query"] = time.monotonic() - began
    finally:
        sql.close()
    print(
        f"{name:<6} bronze write {out['bronze']:7.1f} s   silver+gold full {out['full']:7.1f} s "
        f"({full.mapping_segments} mapping rows)   +{args.increment} increment {out['increment']:6.1f} s "
        f"({', '.join(engines)})   sql open+count {out['open+query'] * 1000:6.0f} ms"
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--increment", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--touched-partitions", type=int, default=10)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from ingest.spark import spark_session
    from replicator.config import SparkConfig

    spark = spark_session(SparkConfig(master="local[*]"), app_name="bench-s3-cost")
    work = Path(tempfile.mkdtemp(prefix="s3-cost-"))
    print(f"# s3_cost: {args.events} events, then {args.increment} on {args.touched_partitions} of "
          f"{args.partitions} partitions; load average {load_average()}")  # fmt: skip
    with moto_server(work) as s3:
        local = _measure(spark, "local", str(work / "lake"), None, args)
        on_s3 = _measure(spark, "s3", f"s3://{_BUCKET}/lake", s3, args)
    print(f"# load average at the end {load_average()}")
    for stage in ("bronze", "full", "increment", "open+query"):
        print(f"s3_over_local_{stage.replace('+', '_')}={on_s3[stage] / local[stage]:.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
