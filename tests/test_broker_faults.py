"""Broker faults on clusters of their own: the replicator waits them out, loses nothing, says so.

Each scenario of ``bench/faults.py`` runs ``mirrorlake replicate`` as a real process against two
extra local clusters S and T started for this module (the session's clusters are shared by every
test and are never killed). Records are counted by content (unique keys) on both clusters.
"""

from __future__ import annotations

import logging

import pytest

from bench.faults import SCENARIOS, cluster_pair, run_scenario, waiting_gauge_on
from replicator.flow.outage import Outages

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
    assert outcome.lost == 0, f"{outcome.lost} of {outcome.produced} records lost"
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
    with caplog.at_level(logging.INFO, logger="replicator.flow.outage"):
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


def test_the_waiting_gauge_is_read_from_prometheus_text():
    page = 'mirrorlake_waiting_for_cluster{flow="S->T",side="source"} 0.0\n'
    assert not waiting_gauge_on(page)
    assert waiting_gauge_on(page + 'mirrorlake_waiting_for_cluster{flow="S->T",side="target"} 1.0\n')
