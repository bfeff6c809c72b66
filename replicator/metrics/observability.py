"""Prometheus metrics and a health endpoint for a running ``Replicator``, on 127.0.0.1 by default.

Nothing is counted on the hot path: flows keep plain counters in ``FlowStats`` and a custom
collector reads them when Prometheus scrapes. The registry belongs to the replicator (no global
state), so several replicators in one process do not mix their metrics.

``GET /metrics``: Prometheus text format. ``GET /health``: JSON with every flow's state,
assigned partitions, error and the clusters it waits for; HTTP 200 while every flow runs and none
waits, 503 (``"status": "degraded"``) otherwise.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from replicator.metrics.connect_metrics import CHECKPOINT, SOURCE, connect_families, quoted

__all__ = ["FlowCollector", "LatencyHistogram", "StatusServer", "LATENCY_BUCKETS", "mm2_families", "waiting_for"]

_log = logging.getLogger(__name__)
MAX_CONNECTIONS = 16  # /metrics and /health connections served at once (a scrape and a probe need two)
READ_TIMEOUT_S = 5.0  # a client that sends nothing this long is disconnected

_STUCK_S = 10.0  # a copy loop that has not turned for this long is reported as waiting
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class FlowCollector(Collector):
    """Reads the flows' stats at scrape time; ``flows`` returns (name, stats) pairs."""

    def __init__(self, flows: Callable[[], list[tuple[str, Any]]]) -> None:
        self._flows = flows

    def collect(self) -> Iterator[Metric]:
        records = CounterMetricFamily("mirrorlake_records", "records copied to the target", labels=["flow"])
        size = CounterMetricFamily("mirrorlake_bytes", "key and value bytes copied", labels=["flow"])
        syncs = CounterMetricFamily("mirrorlake_offset_syncs", "offset sync events published", labels=["flow"])
        skipped = CounterMetricFamily(
            "mirrorlake_skipped_cycle_records", "records not copied because they came from the target", labels=["flow"]
        )
        lag = GaugeMetricFamily(
            "mirrorlake_record_lag", "source records not yet read, per partition", labels=["flow", "topic", "partition"]
        )
        age = GaugeMetricFamily(
            "mirrorlake_record_age_seconds", "age of the newest record read from the source, when read", labels=["flow"]
        )
        latency = HistogramMetricFamily(
            "mirrorlake_replication_latency_seconds",
            "source record timestamp to target acknowledgement (sampled at offset syncs)",
            labels=["flow"],
        )
        waiting = GaugeMetricFamily(
            "mirrorlake_waiting_for_cluster",
            "1 while the flow waits for its source or target cluster to answer again (an outage); "
            "side=loop: its copy loop is held in an admin request or copies nothing with records behind",
            labels=["flow", "side"],
        )
        paused = GaugeMetricFamily(
            "mirrorlake_reading_paused", "1 while the flow does not read: its target is down or slow", labels=["flow"]
        )
        recoveries = CounterMetricFamily(
            "mirrorlake_outage_recoveries", "cluster outages the flow waited out and resumed from", labels=["flow"]
        )
        recreated = CounterMetricFamily(
            "mirrorlake_topics_recreated",
            "topics found deleted and created again (a new topic id), on the source or (its remote topic) the "
            "target: a new life of the mapping",
            labels=["flow", "side"],
        )
        lost_before_copy = CounterMetricFamily(
            "mirrorlake_records_lost_before_copy",
            "source records deleted (retention, delete-records) before the flow copied them",
            labels=["flow"],
        )
        flows = self._flows()
        for name, stats in flows:
            recreated.add_metric([name, "source"], stats.topics_recreated)
            recreated.add_metric([name, "target"], stats.remote_topics_recreated)
            lost_before_copy.add_metric([name], stats.records_lost_before_copy)
            waits = waiting_for(stats)
            for side in ("source", "target", "loop"):
                waiting.add_metric([name, side], 1.0 if side in waits else 0.0)
            paused.add_metric([name], 1.0 if stats.paused else 0.0)
            recoveries.add_metric([name], stats.recoveries)
            records.add_metric([name], stats.records)
            size.add_metric([name], stats.bytes)
            syncs.add_metric([name], stats.syncs)
            skipped.add_metric([name], stats.skipped_cycle)
            for (topic, partition), value in sorted(stats.lag.items()):
                lag.add_metric([name, topic, str(partition)], value)
            if stats.last_record_age_s is not None:
                age.add_metric([name], stats.last_record_age_s)
            buckets, total = stats.latency.snapshot()
            latency.add_metric([name], buckets=buckets, sum_value=total)
        yield from (records, size, syncs, skipped, lag, age, latency, waiting, paused, recoveries)
        yield from (recreated, lost_before_copy)
        yield from mm2_families(flows)
        yield from connect_families(flows)


_SOURCE = "kafka_connect_mirror_mirrorsourceconnector_"
_CHECKPOINT = "kafka_connect_mirror_mirrorcheckpointconnector_"
_PLUGINS = "kafka_connect_plugins_"  # KIP-1280: kafka.connect:type=plugins,connector=C,task=T,...
_NAN = float("nan")


class _Gauges:
    """Gauge families by name, each made once with its label names."""

    def __init__(self) -> None:
        self.families: dict[str, GaugeMetricFamily] = {}

    def add(self, prefix: str, attribute: str, labels: list[str], key: list[str], value: float) -> None:
        name = prefix + attribute
        if name not in self.families:
            self.families[name] = GaugeMetricFamily(name, f"MirrorMaker 2 {attribute} (mirrorlake)", labels=labels)
        self.families[name].add_metric(key, value)

    def windowed(self, prefix: str, attribute: str, labels: list[str], key: list[str], w: Any) -> None:
        self.add(prefix, attribute, labels, key, _NAN if w.last is None else w.last)
        low, high, avg = w.window() or (_NAN, _NAN, _NAN)
        for suffix, value in (("min", low), ("max", high), ("avg", avg)):
            self.add(prefix, f"{attribute}_{suffix}", labels, key, value)


def mm2_families(flows: list[tuple[str, Any]]) -> list[Metric]:
    """MM2's connector metrics of ``flows`` ((name, ``FlowStats``) pairs), named and labelled as the
    JMX exporter names MM2's MBeans, in each layout the flow's ``metric_names_formats`` asks for.

    ``legacy``: ``kafka.connect.mirror:type=MirrorSourceConnector,source,target,topic,partition`` (and
    ``type=MirrorCheckpointConnector,...,group,...``), named as Strimzi's rules do
    (``kafka_connect_mirror_mirrorsourceconnector_<attribute>``). ``new`` (Kafka 4.3, KIP-1280; the
    only one from Kafka 5.0): ``kafka.connect:type=plugins,connector=C,task=T,<the same tags>``, named
    as the exporter does with no rule for it: ``kafka_connect_plugins_<attribute>``, ``connector`` the
    quoted ``S->T.MirrorSourceConnector`` (or ``...MirrorCheckpointConnector``) and ``task`` 0. All
    gauges (Strimzi's rules type them so); min/max/avg are NaN while their 60 s window is empty, as
    Kafka's metrics report them. See ``replicator.metrics.mm2_metrics``.
    """
    gauges = _Gauges()
    for name, stats in flows:
        layouts: list[tuple[str, str, list[str], list[str]]] = []
        if "legacy" in stats.metric_names_formats:
            layouts.append((_SOURCE, _CHECKPOINT, [], []))
        if "new" in stats.metric_names_formats:
            source_task = [quoted(f"{name}.{SOURCE}"), "0"]
            checkpoint_task = [quoted(f"{name}.{CHECKPOINT}"), "0"]
            layouts.append((_PLUGINS, _PLUGINS, source_task, checkpoint_task))
        for source_prefix, checkpoint_prefix, source_task, checkpoint_task in layouts:
            tagged = ["connector", "task"] if source_task else []
            labels = [*tagged, "source", "target", "topic", "partition"]
            for (topic, partition), m in sorted(stats.mm2.source.items()):
                key = [*source_task, stats.source, stats.target, topic, str(partition)]
                gauges.add(source_prefix, "record_count", labels, key, m.record_count)
                gauges.add(source_prefix, "record_rate", labels, key, m.records.rate())
                gauges.add(source_prefix, "byte_count", labels, key, m.byte_count)
                gauges.add(source_prefix, "byte_rate", labels, key, m.bytes.rate())
                gauges.windowed(source_prefix, "record_age_ms", labels, key, m.record_age_ms)
                gauges.windowed(source_prefix, "replication_latency_ms", labels, key, m.replication_latency_ms)
            group_labels = [*tagged, "source", "target", "group", "topic", "partition"]
            for (group, topic, partition), w in sorted(stats.mm2.checkpoint_latency_ms.items()):
                key = [*checkpoint_task, stats.source, stats.target, group, topic, str(partition)]
                gauges.windowed(checkpoint_prefix, "checkpoint_latency_ms", group_labels, key, w)
    return list(gauges.families.values())


def waiting_for(stats: Any) -> dict[str, str]:
    """What a running flow waits for (``FlowStats``): the clusters it says, and its loop if it stopped turning."""
    waiting = dict(stats.waiting())
    stuck_s = time.monotonic() - stats.turned_at
    if stats.state == "running" and stuck_s > _STUCK_S:
        waiting["loop"] = f"the copy loop has waited {stuck_s:.0f} s for a cluster's answer (an admin request)"
    elif stats.state == "running" and getattr(stats, "stalled", None):
        waiting["loop"] = f"stalled: {stats.stalled}"
    return waiting


class LatencyHistogram:
    """A tiny thread-safe cumulative histogram (the flow thread observes, the scraper reads)."""

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self._bounds = bounds
        self._counts = [0] * (len(bounds) + 1)
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        with self._lock:
            for i, bound in enumerate(self._bounds):
                if seconds <= bound:
                    self._counts[i] += 1
                    break
            else:
                self._counts[-1] += 1
            self._sum += seconds

    def snapshot(self) -> tuple[list[tuple[str, float]], float]:
        with self._lock:
            running, out = 0, []
            for bound, count in zip(self._bounds, self._counts, strict=False):
                running += count
                out.append((str(bound), float(running)))
            out.append(("+Inf", float(running + self._counts[-1])))
            return out, self._sum


class _BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most ``MAX_CONNECTIONS`` at once: a connection beyond them is
    closed at once rather than given a thread (250 half-sent requests held 250 threads)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.refused = 0  # connections closed because every slot was taken

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.refused += 1
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class StatusServer:
    """Serves /metrics and /health from daemon threads until ``close``: at most ``MAX_CONNECTIONS``
    at once, and a client that sends nothing for ``READ_TIMEOUT_S`` is disconnected."""

    def __init__(self, registry: CollectorRegistry, health: Callable[[], dict[str, Any]], *, host: str, port: int):
        handler = _handler(registry, health)
        self._server = _BoundedServer((host, port), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="mirrorlake-status", daemon=True)
        self._thread.start()
        _log.info("metrics on http://%s:%d/metrics, health on /health", host, self.port)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(registry: CollectorRegistry, health: Callable[[], dict[str, Any]]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = READ_TIMEOUT_S  # a socket timeout: a slow or silent client loses its connection

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.startswith("/metrics"):
                self._send(200, generate_latest(registry), "text/plain; version=0.0.4; charset=utf-8")
            elif self.path.startswith("/health"):
                body = health()
                code = 200 if body["status"] == "ok" else 503
                self._send(code, json.dumps(body, indent=2).encode(), "application/json")
            else:
                self._send(404, b"not found: try /metrics or /health\n", "text/plain")

        def _send(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
            _log.debug("status request: " + format, *args)

    return Handler
