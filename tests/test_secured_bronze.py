"""Spark's bronze stream reads a state topic on a SASL_SSL cluster, and no password reaches the lakehouse.

Apart from ``test_secured_clusters`` (whose secured brokers it starts once more, module-scoped)
because this test asks for the session's Spark: the test scheduler (``tests/conftest.py``) runs every
module that does on the Spark worker, and the other secured tests need no Spark.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AclBinding, AclOperation, AdminClient, ResourcePatternType, ResourceType

from mirrorlake.localkafka import LocalBroker
from replicator.config import parse_config
from tests.test_secured_clusters import ALLOW, SCRAM, add_scram_user, raw_state_topic, secured_brokers

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[dict[str, LocalBroker]]:
    with secured_brokers(tmp_path_factory.mktemp("secured")) as brokers:
        yield brokers


@pytest.mark.spark
def test_the_bronze_stream_reads_a_sasl_ssl_state_topic(secured, spark, tmp_path):
    """Spark's Java Kafka client gets the JAAS config and a PEM trust store made from librdkafka's settings.

    The principal is a SCRAM user whose password holds double and single quotes, backslashes and
    spaces (the JAAS string must escape them); that password is in none of the lakehouse's files
    (data, Delta log, stream checkpoints) and none of the query's plan and progress strings."""
    from ingest.bronze import start_bronze_ingest
    from ingest.paths import LakehousePaths

    target = secured["T"]
    user, password = f"carol-{uuid.uuid4().hex[:6]}", f'pw "quoted" \\back\\slash\\ it\'s {uuid.uuid4().hex}'
    add_scram_user(target, user, password)
    admin = AdminClient(target.client_config("admin", mechanism="PLAIN"))
    for future in admin.create_acls([
        AclBinding(kind, "*", ResourcePatternType.LITERAL, f"User:{user}", "*", AclOperation.ALL, ALLOW)
        for kind in (ResourceType.TOPIC, ResourceType.GROUP)
    ]).values():  # fmt: skip
        future.result(timeout=30)
    carol = {**target.client_config("alice", mechanism=SCRAM), "sasl.username": user, "sasl.password": password}
    state_topic = raw_state_topic(carol)
    config = parse_config(
        {
            "clusters": {
                "S": {"bootstrap_servers": secured["S"].bootstrap},
                "T": {"bootstrap_servers": target.bootstrap,
                      "client": {k: v for k, v in carol.items() if k != "bootstrap.servers"}},
            },
            "flows": [{"source": "S", "target": "T"}],
            "state_topic": state_topic,
            "lakehouse": {"path": str(tmp_path / "lakehouse")},
        },
        source="tests/test_secured_bronze.py",
    )  # fmt: skip
    paths = LakehousePaths(tmp_path / "lakehouse")
    plans = []
    for query in start_bronze_ingest(spark, config, paths, available_now=True):
        query.awaitTermination(300)
        assert query.exception() is None
        plans += [query._jsq.explainInternal(True), *(p.json for p in query.recentProgress)]
    rows = spark.read.format("delta").load(str(paths.bronze)).collect()
    assert sorted(bytes(r["value"]) for r in rows) == [f"raw-{i}".encode() for i in range(5)]
    assert {r["cluster"] for r in rows} == {"T"}
    secret = password.split()[-1]  # the random part, which no other text holds
    files = [f for f in (tmp_path / "lakehouse").rglob("*") if f.is_file()]
    assert files and not [str(f) for f in files if secret.encode() in f.read_bytes()]
    assert plans and not [p for p in plans if secret in p], "the password is in a plan or progress string"
