"""KIP-1280's metric names (Kafka 4.3): the MM2-named series in the legacy layout, the new one, or both.

The layouts are read from Kafka 4.3.1's own classes: ``MirrorSourceConfig``'s ``metric.names.formats``
documentation names ``kafka.connect.mirror:type=MirrorSourceConnector,source,target,topic,partition``
(legacy) and ``kafka.connect:type=plugins,connector,task,source,target,topic,partition`` (new);
``MirrorCheckpointMetrics`` adds ``group``. The JMX exporter names the new MBeans
``kafka_connect_plugins_<attribute>``. Pure: the stats are filled by hand, the text is what
``/metrics`` serves.
"""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from replicator.config.model import FlowConfig
from replicator.events.model import now_ms
from replicator.metrics.observability import FlowCollector
from replicator.metrics.stats import FlowStats


def _samples(*formats: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    stats = FlowStats(source="A", target="B", metric_names_formats=formats)
    stats.mm2.partition("A.orders", 0).copied(10, 1000, now_ms() - 50)
    stats.mm2.checkpoint_written(("app", "A.orders", 0), 12.0)
    registry = CollectorRegistry()
    registry.register(FlowCollector(lambda: [("A->B", stats)]))
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


LEGACY_COUNT = "kafka_connect_mirror_mirrorsourceconnector_record_count"
NEW_COUNT = "kafka_connect_plugins_record_count"
PARTITION = {"source": "A", "target": "B", "topic": "A.orders", "partition": "0"}


def test_the_default_is_the_legacy_layout_only_as_in_mm2() -> None:
    samples = _samples("legacy")
    assert samples[LEGACY_COUNT] == [(PARTITION, 10.0)]
    assert not [name for name in samples if name.startswith("kafka_connect_plugins_")]
    assert FlowConfig(source="A", target="B").metric_names_formats == ("legacy",)


def test_the_new_layout_adds_the_connector_and_task_and_keeps_the_attributes() -> None:
    samples = _samples("new")
    source = {"connector": '"A->B.MirrorSourceConnector"', "task": "0", **PARTITION}
    assert samples[NEW_COUNT] == [(source, 10.0)]
    assert samples["kafka_connect_plugins_byte_count"] == [(source, 1000.0)]
    checkpoint = {"connector": '"A->B.MirrorCheckpointConnector"', "task": "0", "source": "A", "target": "B",
                  "group": "app", "topic": "A.orders", "partition": "0"}  # fmt: skip
    assert samples["kafka_connect_plugins_checkpoint_latency_ms"] == [(checkpoint, 12.0)]
    assert not [name for name in samples if name.startswith("kafka_connect_mirror_")]


def test_both_layouts_carry_the_same_attributes_and_counts() -> None:
    samples = _samples("legacy", "new")
    legacy = {n.removeprefix("kafka_connect_mirror_mirrorsourceconnector_") for n in samples if "sourceconnector_" in n}
    new = {n.removeprefix("kafka_connect_plugins_") for n in samples if n.startswith("kafka_connect_plugins_")}
    checkpoint = {"checkpoint_latency_ms", *(f"checkpoint_latency_ms_{s}" for s in ("min", "max", "avg"))}
    assert legacy and legacy | checkpoint == new
    assert samples[LEGACY_COUNT][0][1] == samples[NEW_COUNT][0][1] == 10.0


@pytest.mark.parametrize("formats", [(), ("legacy", "legacy"), ("old",)])
def test_a_wrong_list_of_formats_is_refused_naming_the_setting(formats: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="metric_names_formats"):
        FlowConfig(source="A", target="B", metric_names_formats=formats)  # type: ignore[arg-type]
