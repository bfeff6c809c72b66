"""Embed the replicator in a Python process: one flow A->B, run until caught up, then stopped.

A long-running service would call ``replicator.start()`` and ``replicator.stop()`` from its own
lifecycle (``stop`` drains, publishes the last offset syncs and commits) and read
``replicator.health()`` for its own health check.
"""

from __future__ import annotations

import argparse
import logging

from replicator import Replicator, parse_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", required=True, help="bootstrap servers of cluster A")
    parser.add_argument("--target", required=True, help="bootstrap servers of cluster B")
    parser.add_argument("--topic", required=True, help="topic (regex) to mirror")
    parser.add_argument("--state-topic", default="mirrorlake.events")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    config = parse_config(
        {
            "clusters": {"A": {"bootstrap_servers": args.source}, "B": {"bootstrap_servers": args.target}},
            "flows": [{"source": "A", "target": "B", "topics": [args.topic], "emit_heartbeats": False}],
            "state_topic": args.state_topic,
        },
        source="examples/embed_replicator.py",
    )
    replicator = Replicator(config, status_port=None)
    for flow, stats in replicator.run_until_caught_up().items():
        print(f"{flow}: copied {stats.records} records, published {stats.syncs} offset syncs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
