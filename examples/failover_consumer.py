"""A consumer application that fails over from cluster A to cluster B.

It asks the client core where its group resumes on B (the latest exact checkpoints, read from
B's state topic alone: A may be gone), assigns exactly those offsets on B and reads on. This is
what MM2 users do with ``RemoteClusterUtils.translateOffsets``; the import below loads no
replicator runtime, metrics server or Spark.
"""

from __future__ import annotations

import argparse

from confluent_kafka import Consumer, TopicPartition

from replicator import parse_config, translate_offsets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", required=True, help="bootstrap servers of cluster A (only named, never contacted)")
    parser.add_argument("--target", required=True, help="bootstrap servers of cluster B")
    parser.add_argument("--group", required=True, help="the consumer group that fails over")
    parser.add_argument("--state-topic", default="mirrorlake.events")
    parser.add_argument("--max-records", type=int, default=100, help="records to read on B before stopping")
    args = parser.parse_args(argv)

    config = parse_config(
        {
            "clusters": {"A": {"bootstrap_servers": args.source}, "B": {"bootstrap_servers": args.target}},
            "flows": [{"source": "A", "target": "B"}],
            "state_topic": args.state_topic,
        },
        source="examples/failover_consumer.py",
    )
    resume = translate_offsets(config, "A->B", args.group)
    consumer = Consumer(
        {
            "bootstrap.servers": args.target,
            "group.id": args.group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([TopicPartition(t, p, c.downstream_offset) for (t, p), c in sorted(resume.items())])
        for (topic, partition), c in sorted(resume.items()):
            at, committed = c.downstream_offset, c.upstream_offset
            print(f"resume {topic}[{partition}] at {at} ({c.method}; committed on A: {committed})")
        read = 0
        while read < args.max_records:
            batch = consumer.consume(500, timeout=2.0)
            if not batch:
                break
            for msg in batch:
                if msg.error() is None:
                    read += 1
                    print(f"read {msg.topic()}[{msg.partition()}]@{msg.offset()} key={msg.key()!r}")
        if read:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
