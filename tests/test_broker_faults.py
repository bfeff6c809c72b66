"""Broker faults on clusters of their own: the replicator waits them out, loses nothing, says so.

Each scenario of ``bench/faults.py`` runs ``mirrorlake replicate`` as a real process against two
extra local clusters S and T started for this module (the session's clusters are shared by every
test and are never killed). Records are counted by content (unique keys) on both clusters.
"""

from __future__ import annotations

import logging
import re
import signal
import socket
import subprocess
import sys
import threading
import uuid

import pytest
import yaml
from confluent_kafka import KafkaError, KafkaException

from bench.faults import (
    PARTITIONS,
    ROOT,
    SCENARIOS,
    SteadyProducer,
    cluster_pair,
    end_offsets,
    free_port,
    health,
    metrics,
    read_keys,
    run_scenario,
    waiting_gauge_on,
    write_replicator_config,
)
from mirrorlake.traffic import ensure_topic
from replicator.errors import ReplicationError
from replicator.flow.control.outage import Outages, transient
from replicator.flow.control.shutdown import StopBudget, StopTimedOut
from replicator.metrics.observability import waiting_for
from replicator.metrics.stats import FlowStats
from tests.waiting import wait_for

# outage lengths: the user's incident (target SIGKILLed for 30 s) in full, the others shorter
CASES = [("target-kill-alo", 30.0), ("target-kill-eos", 15.0), ("source-restart", 3.0), ("state-cluster-frozen", 15.0)]


@pytest.fixture(scope="module")
def fault_pair(tmp_path_factory):
    with cluster_pair(tmp_path_factory.mktemp("fault-clusters")) as pair:
        yield pair


@pytest.mark.kafka
@pytest.mark.parametrize(("name", "down_s"), CASES, ids=[c[0] for c in CASES])
def test_the_replicator_waits_out_a_broker_fault_and_loses_nothing(fault_pair, tmp_path, name, down_s):
    scenario = SCENARIOS[name]
    outcome = run_scenario(fault_pair, scenario, tmp_path, down_s=down_s, rate=1000)
    log = outcome.log.read_text(errors="replace")
    assert outcome.stayed_up, log[-4000:]
    assert outcome.exit_code == 0, log[-4000:]
    assert outcome.produced > 0
    assert outcome.lost == 0, f"{outcome.lost} of {outcome.produced} records lost; the log:\n" + log[-6000:]
    if scenario.exactly_once:
        assert outcome.duplicated == 0, f"{outcome.duplicated} duplicates under exactly-once (read_committed)"
    assert outcome.recover_s is not None, log[-4000:]
    assert outcome.degraded_seen, "/health never said degraded during the fault"
    assert outcome.gauge_seen, "mirrorlake_waiting_for_cluster never reached 1 during the fault"
    expected_side = "target" if scenario.side == "T" else "source"
    # a frozen target may also hold the copy loop in an admin request: health then says "loop"
    assert outcome.waiting_for.startswith((expected_side, "loop")), outcome.waiting_for
    held = outcome.waiting_for.startswith("loop")  # held in an admin request: not reading either
    if scenario.side == "T" and not held:
        assert outcome.paused_seen, "reading was not paused while the target was down"
    assert outcome.error_lines == 0, "ERROR lines or a traceback in the replicator's log:\n" + log[-4000:]
    waits = log.count(f"waiting for the {expected_side} cluster")
    assert waits <= 3, f"{waits} 'waiting for' lines: one per outage expected, not one per retry"
    assert held or waits >= 1, "no 'waiting for' line"


def test_an_outage_is_logged_once_with_bounded_back_off(caplog):
    outages = Outages("S->T", {"source": "S", "target": "T"}, {"source": {}, "target": {}})
    with caplog.at_level(logging.INFO, logger="replicator.flow.control.outage"):
        for _ in range(50):
            assert outages.failed("target", TimeoutError())
        delays = [outages.delay_left("target")]
        outages.wait_for("target", "all brokers are down")
        assert outages.waiting == {"target": "cluster T: all brokers are down"}
        outages.recovered("target")
    assert outages.waiting == {}
    assert outages.recoveries == 1
    assert 0 < delays[0] <= 10.0  # bounded, however many attempts failed
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines  # one line when the wait starts, one when it ends
    assert "waiting for the target cluster T" in lines[0] and "answers again" in lines[1]
    assert not outages.failed("target", ValueError("not a broker outage"))


@pytest.mark.parametrize(
    "code",
    [
        KafkaError._DESTROY_BROKER,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._WAIT_COORD,
    ],
)
def test_a_broker_going_away_mid_request_is_an_outage_to_wait_out(code):
    """The soak's exit 9: a process starting while S restarted read the state topic and got "Broker handle
    destroyed without termination"; wrapped in the reader's error, it must still read as an outage. The
    30-minute soak of 2026-11-29 (c): a re-created topic's start committed while S was down failed the
    flow with "Commit failed: Local: Waiting for coordinator" (exit 1)."""
    wrapped = ReplicationError("cannot read state topic x")
    wrapped.__cause__ = KafkaException(KafkaError(code))
    assert transient(wrapped)
    assert not transient(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))


def test_health_sees_a_wait_that_starts_inside_a_blocking_call():
    """An exactly-once commit retried while the target is down never returns to the loop; health
    and the gauge read the flow's outages live, so the wait shows at once, not at the next turn."""
    outages = Outages("S->T", {"source": "S", "target": "T"}, {"source": {}, "target": {}})
    stats = FlowStats(source="S", target="T", state="running")
    stats.waiting = lambda: outages.waiting
    assert waiting_for(stats) == {}
    assert outages.failed("target", TimeoutError())  # what _waiting_out does, with no loop turn after it
    assert waiting_for(stats) == {"target": "cluster T: no answer in time"}
    outages.recovered("target")
    assert waiting_for(stats) == {}


def test_the_waiting_gauge_is_read_from_prometheus_text():
    page = 'mirrorlake_waiting_for_cluster{flow="S->T",side="source"} 0.0\n'
    assert not waiting_gauge_on(page)
    assert waiting_gauge_on(page + 'mirrorlake_waiting_for_cluster{flow="S->T",side="target"} 1.0\n')


def test_a_status_page_cut_off_by_the_process_exiting_reads_as_no_page():
    """A poller races the replicator's exit: a reply cut short must read as "nothing", not raise."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]

        def cut_short(replies: int) -> None:
            for _ in range(replies):
                conn, _ = server.accept()
                with conn:
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 10593\r\n\r\n{")

        thread = threading.Thread(target=cut_short, args=(2,), daemon=True)
        thread.start()
        assert metrics(port) == ""
        assert health(port) == {}
        thread.join(10)


@pytest.mark.kafka
@pytest.mark.parametrize("exactly_once", [False, True], ids=["alo", "eos"])
def test_sigterm_while_the_target_is_down_stops_within_the_stop_timeout_and_loses_nothing(
    fault_pair, tmp_path, exactly_once
):
    """SIGTERM with the target SIGKILLed and records in flight: the replicator stops once
    ``stop_timeout_seconds`` are spent (not when the target is back), exits 0 with a WARNING saying
    what it did not flush, and commits only what is durable: a run after the target is back copies
    every record (none lost)."""
    scenario = SCENARIOS["target-kill-eos" if exactly_once else "target-kill-alo"]
    source, target = fault_pair.bootstrap("S"), fault_pair.bootstrap("T")
    topic = f"sigterm-{uuid.uuid4().hex[:8]}"
    ensure_topic(source, topic, PARTITIONS)
    config = write_replicator_config(fault_pair, scenario, topic, tmp_path / "sigterm.yaml")
    config.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), "stop_timeout_seconds": 5}))
    port = free_port()
    log = tmp_path / "sigterm.log"
    producer = SteadyProducer(source, topic, 1000)
    broker = fault_pair.brokers["T"]
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mirrorlake.cli", "replicate", str(config), "--status-port", str(port)],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    try:
        producer.start()
        wait_for(lambda: proc.poll() is not None or end_offsets(target, f"S.{topic}") > 0, "copies on T", every_s=0.5)
        assert proc.poll() is None, log.read_text()[-4000:]
        broker.kill()

        def waiting() -> bool:
            return any("target" in f.get("waiting_for", {}) for f in health(port).get("flows", {}).values())

        wait_for(lambda: proc.poll() is not None or waiting(), "the flow to wait for T", every_s=0.5)
        assert proc.poll() is None, log.read_text()[-4000:]
        producer.stop()
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(120)  # 5 s of stop timeout, then closing; the target stays down meanwhile
        except subprocess.TimeoutExpired:
            pytest.fail("the replicator did not stop while the target was down:\n" + log.read_text()[-4000:])
    finally:
        producer.stop()
        if proc.poll() is None:
            proc.kill()
        if not broker.is_running():  # the module's other tests need T
            broker.start()
            broker.wait_ready()
    text = log.read_text(errors="replace")
    assert code == 0, text[-4000:]
    assert "Traceback" not in text and " ERROR " not in text, text[-4000:]
    if exactly_once:  # the warning counts what the abort drops: the open transaction's source offsets
        dropped = re.search(r"(\d+) source offsets consumed since the last commit( \(plus \d+ partitions)?", text)
        assert dropped and (int(dropped.group(1)) > 0 or dropped.group(2)), text[-4000:]
    else:
        assert "stopping without flushing" in text, text[-4000:]
    rerun = subprocess.run(
        [sys.executable, "-m", "mirrorlake.cli", "replicate", str(config), "--until-caught-up"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    source_keys, target_keys = read_keys(source, topic), read_keys(target, f"S.{topic}")
    assert source_keys and not set(source_keys) - set(target_keys), "records lost"
    if exactly_once:
        assert len(target_keys) == len(set(target_keys)), "duplicates under exactly-once (read_committed)"


def test_the_stop_budget_counts_only_from_the_stop():
    stopping = False
    spent_at_once = StopBudget(0, lambda: stopping)
    long = StopBudget(3600, lambda: stopping)
    spent_at_once.check("the drain")  # not stopping: no budget runs, however long the wait
    assert not spent_at_once.spent
    stopping = True
    long.check("the drain")
    with pytest.raises(StopTimedOut, match="the drain not done 0 s after the stop"):
        spent_at_once.check("the drain")
    assert spent_at_once.spent and not long.spent
