"""Fast checks of the dashboard's logic: formatting, status, builds for time travel, and the app's
empty and error states under Streamlit's AppTest (no Kafka, no Spark, no browser; the browser
tests in test_dashboard_browser.py check the pages with data)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from streamlit.testing.v1 import AppTest

from dashboards import fmt
from dashboards.graph import FlowEdge, HeartbeatEdge, topology_dot
from dashboards.status import FlowHealth, ProcessState, flow_lifecycle, flow_status
from dashboards.timetravel import builds, moment
from dashboards.views.common import Y_FORMAT, time_line_chart
from dashboards.views.divergence import apply_filters
from dashboards.views.lag import current_totals
from dashboards.views.mapping import label_copies

APP = str(Path(__file__).parent.parent / "dashboards" / "app.py")
NOW = 1_763_800_000_000


def test_times_durations_and_counts_read_as_people_write_them():
    assert fmt.utc(0) == "1970-01-01 00:00:00 UTC"
    assert fmt.when(NOW - 300_000, NOW).endswith("(5 min ago)")
    assert fmt.ago(NOW + 3_000, NOW) == "in 3 s"
    assert fmt.ago(NOW - 1_012_000, NOW) == "16 min ago"
    assert fmt.ago(NOW, NOW) == "just now"
    assert [fmt.duration_ms(v) for v in (850, 4_200, 200_000, 7_500_000, 5 * 86_400_000)] == [
        "850 ms",
        "4.2 s",
        "3 min 20 s",
        "2 h 5 min",
        "5 d",
    ]
    assert fmt.count(1_234_567, "record") == "1,234,567 records"
    assert fmt.count(1, "record") == "1 record"
    assert fmt.rate(12_345.6) == "12,346 records/s"
    assert fmt.count(None) == fmt.count(float("nan")) == fmt.duration_ms(None) == fmt.UNKNOWN


def test_status_is_the_worst_check_with_its_reasons():
    fresh = FlowHealth("A->B", last_heartbeat_ms=NOW - 1_000, last_sync_ms=NOW - 2_000, records_at_risk=3)
    green = flow_status(fresh, NOW)
    assert green.level == "green" and "3 records at risk" in green.reason
    lagging = FlowHealth("A->B", last_heartbeat_ms=NOW - 1_000, seconds_at_risk=45.0, unexpected_divergences=2)
    amber = flow_status(lagging, NOW)
    assert amber.level == "amber" and len(amber.reasons) == 2
    broken = FlowHealth(
        "A->B", last_sync_ms=NOW - 600_000, records_expired=4, lifecycle_state="error", lifecycle_reason="boom"
    )
    red = flow_status(broken, NOW)
    assert red.level == "red"
    assert red.reasons == (
        "replicator error: boom",
        "4 records deleted on the source before they were copied",
        "silent for 10 min (last heartbeat/sync)",
    )
    assert flow_status(FlowHealth("A->B"), NOW).reason == "no heartbeat or offset sync seen yet"
    gone = FlowHealth("A->B", last_sync_ms=NOW - 1_000, records_at_risk=15, records_deleted_on_target=15)
    assert flow_status(gone, NOW).reasons == (
        "15 records deleted from the target by retention/deletion after they were copied: "
        "a failover would not find them",
    )
    compacted = FlowHealth("A->B", last_sync_ms=NOW - 1_000, records_at_risk=50, records_compacted_on_target=50)
    assert flow_status(compacted, NOW).reasons == (
        "50 records removed from the target by compaction (cleanup.policy=compact) after they were copied: "
        "a failover would not find them (exact per group: mirrorlake failover plan)",
    )


def test_a_flow_runs_while_any_process_s_latest_word_is_started():
    """Issue 38: ids carry the process, so the demo's batch run that stopped cleanly must not paint
    the replicator started after it "stopped"; an error or a stop counts only after the latest start."""
    batch_run = ProcessState("host-100", "stopped", None, NOW - 60_000)
    live = ProcessState("host-200", "started", None, NOW - 30_000)
    assert flow_lifecycle([batch_run, live]) == ("running", None)
    assert flow_lifecycle([live, ProcessState("host-300", "error", "boom", NOW - 1_000)]) == ("error", "boom")
    old_error = ProcessState("host-50", "error", "old boom", NOW - 90_000)
    assert flow_lifecycle([old_error, live]) == ("running", None)  # failed, then started again
    live_stopped = ProcessState("host-200", "stopped", None, NOW - 5_000)
    assert flow_lifecycle([batch_run, live_stopped]) == ("stopped", None)  # the incident: every process stopped
    requested = ProcessState("failover@host-9", "stop_requested", "failover apply --stop-replication", NOW)
    assert flow_lifecycle([live_stopped, requested]) == ("stopped", "failover apply --stop-replication")
    assert flow_lifecycle([old_error]) == ("error", "old boom")  # nothing started since it failed
    assert flow_lifecycle([]) == (None, None)
    running = FlowHealth("A->B", last_heartbeat_ms=NOW - 1_000, lifecycle_state="running")
    assert flow_status(running, NOW).level == "green"
    stopped = FlowHealth("A->B", last_heartbeat_ms=NOW - 1_000, lifecycle_state="stopped", lifecycle_reason="why")
    assert flow_status(stopped, NOW).reasons == ("replicator stopped (why)",)


def test_builds_end_with_the_last_gold_commit_before_the_next_silver_one():
    history = {
        "bronze_events": [(0, 50), (1, 150), (2, 170)],  # ingest commits do not delimit builds
        "offset_sync": [(0, 100), (1, 200)],
        "watermark": [(0, 101)],
        "offset_mapping": [(0, 102), (1, 202)],
        "rpo": [(0, 103)],
    }
    found = builds(history)
    assert [(b.number, b.at_ms) for b in found] == [(1, 103), (2, 202)]
    assert found[1].gold_versions == {"offset_mapping": 1, "rpo": 0}
    for ms in (103, 1_763_800_000_001, 1_763_800_000_999):  # LakehouseSQL maps the moment back exactly
        assert int(moment(ms).timestamp() * 1000) == ms


def test_topology_graph_has_clusters_flows_and_heartbeat_hops():
    dot = topology_dot(
        ["A", "B", "C"],
        [FlowEdge("A", "B", "red", 12.0, 44, 5_000.0)],
        [HeartbeatEdge("A", "B", 30.0)],
    )
    assert '"A" -> "B" [label="A->B\\n12 records/s\\nlag 44 records / 5.0 s", color="#c62828"' in dot
    assert 'label="heartbeat 30 ms", style=dashed' in dot
    assert '"C";' in dot


def test_a_later_copy_of_a_copied_range_is_a_replay():
    segments = pd.DataFrame(
        {
            "upstream_start": [0, 102, 140],
            "upstream_end": [99, 150, 180],
            "downstream_start": [0, 100, 149],
        }
    )
    assert list(label_copies(segments)) == ["copy", "copy", "replay"]


def test_a_recreated_topic_s_new_life_is_a_copy_not_a_replay_and_its_last_offset_is_the_new_one():
    """The new topic's offsets 0..49 name other records than the old topic's 0..99: copies, not replays."""
    segments = pd.DataFrame(
        {
            "source_topic_id": ["old", "old", "new"],
            "upstream_start": [0, 50, 0],
            "upstream_end": [99, 60, 49],
            "downstream_start": [0, 100, 111],
        }
    )
    assert list(label_copies(segments)) == ["copy", "replay", "copy"]


def test_a_recopy_into_a_recreated_remote_topic_is_a_copy_and_copies_before_ids_join_the_first():
    """The source copied again into a new remote topic (T2) covers the old copies' range: copies, not
    replays; a second copy within T2 is a replay."""
    segments = pd.DataFrame(
        {
            "source_topic_id": ["S", "S", "S", "S"],
            "target_topic_id": ["T1", "T1", "T2", "T2"],
            "upstream_start": [0, 5, 0, 5],
            "upstream_end": [9, 19, 19, 6],
            "downstream_start": [0, 10, 0, 20],
        }
    )
    assert list(label_copies(segments)) == ["copy", "replay", "copy", "replay"]


def test_current_totals_add_each_partitions_latest_value():
    t = pd.to_datetime([1, 2, 3], unit="s")
    series = pd.DataFrame(
        {
            "time": [t[0], t[0], t[1], t[2]],
            "partition": ["p[0]", "p[1]", "p[0]", "p[1]"],
            "records_unreplicated": [10, 5, 7, 1],
            "seconds_unreplicated": [3.0, 1.0, 2.0, 0.5],
        }
    )
    now, before = current_totals(series)
    assert (now["records"], now["seconds"]) == (8, 2.0)
    assert before is not None and before["records"] == 12


def test_time_charts_label_counts_without_six_decimals():
    # a caught-up flow: every partition at 0, which Vega-Lite's default labels "0.000000"
    rows = pd.DataFrame(
        {"time": pd.to_datetime([NOW] * 3, unit="ms", utc=True), "partition": ["t[0]", "t[1]", "t[2]"], "v": [0] * 3}
    )
    y = time_line_chart(rows, "v", "partition", "records").to_dict()["encoding"]["y"]
    assert y["axis"]["format"] == Y_FORMAT == ",~f"  # d3: 0 -> "0", 1234567 -> "1,234,567", 0.25 -> "0.25"
    assert y["field"] == "v"


def test_divergence_filters():
    rows = pd.DataFrame(
        {
            "flow": ["A->B", "A->B", "B->A"],
            "kind": ["config", "data", "config"],
            "source_topic": ["orders", "orders", "payments"],
            "expected": [True, False, None],
        }
    )
    assert len(apply_filters(rows, ["A->B", "B->A"], ["config", "data"], "", expected=True)) == 3
    assert list(apply_filters(rows, ["A->B", "B->A"], ["config"], "", expected=False)["source_topic"]) == ["payments"]
    assert list(apply_filters(rows, ["A->B"], ["config", "data"], "ORD", expected=False)["kind"]) == ["data"]


def _app(monkeypatch: pytest.MonkeyPatch, config: Path) -> AppTest:
    monkeypatch.setenv("MIRRORLAKE_CONFIG", str(config))
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    assert not app.exception, app.exception
    return app


def test_an_empty_lakehouse_names_the_commands_that_fill_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    config = tmp_path / "conf.yaml"
    config.write_text(
        yaml.safe_dump(
            {"clusters": {"A": {"bootstrap_servers": "127.0.0.1:1"}}, "lakehouse": {"path": str(tmp_path / "lake")}}
        )
    )
    app = _app(monkeypatch, config)
    assert [t.value for t in app.title] == ["Overview"]
    assert "mirrorlake lakehouse build" in app.info[0].value


def test_a_bad_config_is_a_message_not_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    app = _app(monkeypatch, tmp_path / "missing.yaml")
    assert "Cannot read the configuration" in app.info[0].value
    assert "missing.yaml" in app.info[0].value


def _failover_plan_page(cut_ms: int | None, with_plan: bool) -> None:
    """The Failover page's plan section over hand-made macro answers (run by AppTest as a script)."""
    import pandas as pd

    from dashboards.views.failover import plan_section

    plan = pd.DataFrame(
        {
            "group": ["app", "app", "other"],
            "source_topic": ["orders", "orders", "orders"],
            "partition": [0, 1, 0],
            "committed_offset": [100, 80, 50],
            "target_offset": [100, 78, 50],
            "records_lost": [0, 2, 5],
            "records_reread": [3, 0, 0],
            "partition_records_unreplicated": [0, 2, 0],
            "as_of_ms": [1_763_800_000_000] * 3,
        }
    )
    answers = {
        "failover_plan": plan if with_plan else pd.DataFrame(),
        "consistent_cut": pd.DataFrame({"cut_ms": [cut_ms], "partitions": [2], "records_unreplicated": [2]}),
        "failovers_applied": pd.DataFrame(),
        "failbacks_applied": pd.DataFrame(
            {"applied_at_ms": [1_763_800_030_000], "action": ["recover"], "records": [4], "ranges": [1],
             "bytes": [40], "groups": [""], "offsets_written": [0], "user": ["u"]}
        ) if with_plan else pd.DataFrame(),
    }  # fmt: skip

    class StubView:
        now_ms = 1_763_800_060_000

        def get(self, fn, *args):
            return answers[fn.__name__]

    plan_section(StubView(), "A->B", ["app"])


def test_failover_page_shows_the_plan_figures_and_the_consistent_cut():
    app = AppTest.from_function(_failover_plan_page, kwargs={"cut_ms": NOW, "with_plan": True}, default_timeout=60)
    app.run()
    assert not app.exception, app.exception
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Consistent cut"] == fmt.moment(NOW, 1_763_800_060_000)
    assert metrics["Lost by resuming (exact)"] == fmt.count(2)  # the chosen group only
    assert metrics["Re-read (exact)"] == fmt.count(3)
    table = app.dataframe[0].value
    assert list(table["target offset"]) == [100, 78] and list(table["group"]) == ["app", "app"]
    assert any("mirrorlake failover apply" in c.value for c in app.caption)  # read-only: applying stays a CLI action
    failbacks = app.dataframe[1].value
    assert list(failbacks["action"]) == ["recover"] and list(failbacks["records"]) == [4]


def test_failover_page_without_a_plan_names_the_commands():
    app = AppTest.from_function(_failover_plan_page, kwargs={"cut_ms": None, "with_plan": False}, default_timeout=60)
    app.run()
    assert not app.exception, app.exception
    assert {m.label: m.value for m in app.metric}["Consistent cut"] == "unknown"
    assert "mirrorlake failover plan --flow 'A->B'" in app.info[0].value


def _failover_page(age_s: int, unreplicated: int) -> None:
    """The Failover page over hand-made answers whose newest watermark is ``age_s`` old (AppTest script)."""
    import pandas as pd

    from dashboards.views.failover import render
    from replicator.config import parse_config

    now = 1_763_800_060_000
    rpo = pd.DataFrame(
        {"source_topic": ["orders", "orders"], "partition": [0, 1], "records_unreplicated": [unreplicated, 0],
         "records_expired_unreplicated": [0, 0], "seconds_unreplicated": [2.2, 0.0],
         "last_replicated_offset": [40076, 499], "read_position": [40117, 500],
         "log_end_offset": [40117 + unreplicated, 500],
         "observed_at_ms": [now - age_s * 1000, now - 1000]}
    )  # fmt: skip
    answers = {
        "flows": ["A->B"],
        "rpo_now": rpo,
        "failover_now": pd.DataFrame(),
        "failover_plan": pd.DataFrame(),
        "consistent_cut": pd.DataFrame({"cut_ms": [None], "partitions": [2], "records_unreplicated": [unreplicated]}),
        "failovers_applied": pd.DataFrame(),
        "failbacks_applied": pd.DataFrame(),
    }

    class StubView:
        now_ms = now
        configured_flows = ["A->B"]
        config = parse_config(
            {"clusters": {"A": {"bootstrap_servers": "127.0.0.1:1"}, "B": {"bootstrap_servers": "127.0.0.1:2"}},
             "flows": [{"source": "A", "target": "B", "watermarks_interval_seconds": 5}]}
        )  # fmt: skip

        def get(self, fn, *args):
            return answers[fn.__name__]

    render(StubView())


def test_a_stale_rpo_is_a_lower_bound_with_its_age_never_a_current_figure():
    """Issue 38: with the replicator stopped for 75 s, the page said "500 records not replicated yet"
    and "oldest at risk 2.2 s" as if measured now."""
    app = AppTest.from_function(_failover_page, kwargs={"age_s": 75, "unreplicated": 500}, default_timeout=60)
    app.run()
    assert not app.exception, app.exception
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Records at risk (RPO)"] == "≥ 500"
    assert metrics["Oldest at risk"] == "≥ " + fmt.duration_ms(2200 + 75_000)
    (error,) = app.error
    assert error.value.startswith("Not measured for 1 min 15 s: a failover now loses at least 500 records")
    assert f"as of {fmt.utc(1_763_800_060_000 - 75_000)} (1 min ago)" in error.value
    assert "mirrorlake observe --follow" in error.value
    assert not app.success and not app.warning
    table = app.dataframe[0].value
    assert list(table["replicated up to"]) == [40117, 500] and list(table["last offset sync"]) == [40076, 499]


def test_a_fresh_rpo_is_shown_as_measured_with_its_time():
    app = AppTest.from_function(_failover_page, kwargs={"age_s": 3, "unreplicated": 500}, default_timeout=60)
    app.run()
    assert not app.exception, app.exception
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Records at risk (RPO)"] == "500"
    assert metrics["Oldest at risk"] == fmt.duration_ms(2200)
    assert app.warning[0].value == "A failover now loses data: 500 records not replicated yet."
    assert any(c.value.startswith("Records at risk as of ") for c in app.caption)
    assert not app.error
