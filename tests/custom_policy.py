"""A custom replication policy, loaded by name in tests (``tests.custom_policy:Upper``)."""

from replicator.client.policy import ReplicationPolicy
from replicator.config import PolicyConfig


class Upper(ReplicationPolicy):
    separator = "."

    def configure(self, config: PolicyConfig) -> None:
        self.separator = config.separator

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias.upper()}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        alias, sep, _ = topic.partition(self.separator)
        return alias if sep else None
