"""The dashboard as a person sees it: `mirrorlake dashboard` (Streamlit) driven by headless Chromium.

Runs against the session's lakehouse built from real clusters (``built`` in
``tests/lakehouse_support.py``: four rounds of state events on a real state topic, built by Spark),
started the way ``mirrorlake dashboard`` starts it, on a free 127.0.0.1 port, stopped by PID.
Every page must load without an exception and show the figures the same SQL returns (one pass
over the pages); the translate box must answer the ground-truth offset; the "as of" selector must
change what every page shows. With ``$MIRRORLAKE_SCREENSHOTS`` set, a PNG per page is written
there, e.g. ``MIRRORLAKE_SCREENSHOTS=docs/screenshots``.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dashboards import fmt
from dashboards.serve import command
from dashboards.timetravel import builds, moment
from dashboards.views import PAGES
from lakehouse.api import Lakehouse
from lakehouse.sql import LakehouseSQL
from replicator.client.mapping import build_segments, points_from_sync, translate
from tests import lakehouse_support as ev
from tests.browser_support import chromium_page, cut_off, drawn, idle, open_page, screenshot_dir, settled, wait_metric
from tests.dashboard_support import free_port, healthy
from tests.lakehouse_support import Built
from tests.waiting import wait_for

pytest_plugins = ["tests.lakehouse_support"]  # the session fixture ``built``
pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.browser]

CANARY = f"canary-{uuid.uuid4().hex}"
SECURED_CLIENT = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanisms": "SCRAM-SHA-512",
    "sasl.username": "dashboard-viewer",
    "sasl.password": CANARY,
}


@pytest.fixture(scope="module")
def dashboard(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dashboard's base URL, served by ``streamlit run`` exactly as ``mirrorlake dashboard`` runs it."""
    work = tmp_path_factory.mktemp("dashboard")
    config_file = work / "conf.yaml"
    config_file.write_text(
        yaml.safe_dump(
            {
                # cluster A's SASL password in the config text (the dashboard connects to no cluster): no page shows it
                "clusters": {
                    a: {"bootstrap_servers": c.bootstrap_servers, **({"client": SECURED_CLIENT} if a == "A" else {})}
                    for a, c in built.config.clusters.items()
                },
                "flows": [{"source": "A", "target": "B", "topics": ["orders"]}],
                "lakehouse": {"path": str(built.config.lakehouse.path)},
            }
        )
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (work / "streamlit.log").open("wb") as log:
        proc = subprocess.Popen(command(config_file, port=port), stdout=log, stderr=subprocess.STDOUT, cwd=work)
    try:
        wait_for(
            lambda: proc.poll() is not None or healthy(url), "the dashboard to answer /_stcore/health", timeout_s=180
        )
        assert proc.poll() is None, (work / "streamlit.log").read_text()
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """Where each page's PNG goes: only when ``$MIRRORLAKE_SCREENSHOTS`` asks for them (no one looks
    at a CI run's)."""
    return screenshot_dir(tmp_path_factory, "dashboard") if os.environ.get("MIRRORLAKE_SCREENSHOTS") else None


@pytest.fixture(scope="module")
def page(dashboard: str):  # noqa: ANN201 - playwright's Page
    yield from chromium_page()


def _sql(built: Built, query: str, as_of=None):  # noqa: ANN001
    sql = LakehouseSQL(built.config.lakehouse.path, as_of=as_of)
    try:
        return sql.query(query).rows[0][0]
    finally:
        sql.close()


def _figures(built: Built) -> dict[str, list[tuple[str, str]]]:
    """Per page (slug), the metrics it must show: what the same SQL returns."""
    at_risk = fmt.count(_sql(built, "SELECT sum(records_unreplicated) FROM rpo_now('A->B')"))
    lost = _sql(built, "SELECT sum(records_lost_total) FROM rpo_groups WHERE flow = 'A->B'")
    groups = _sql(built, 'SELECT count(DISTINCT "group") FROM group_offsets')
    segments = _sql(built, f"SELECT count(*) FROM offset_mapping WHERE source_topic = '{ev.TOPIC}' AND partition = 0")
    cut = _sql(built, "SELECT cut_ms FROM consistent_cut('A->B')")
    plan_lost = _sql(built, "SELECT sum(records_lost) FROM failover_plan('A->B')")
    return {
        "overview": [("Lag (records)", at_risk)],
        "lag": [("Records at risk", at_risk)],
        "groups": [("Lost on failover now", fmt.count(lost)), ("Groups", fmt.count(groups))],
        "divergence": [("Differences", fmt.count(_sql(built, "SELECT count(*) FROM divergence")))],
        "mapping": [("Segments", fmt.count(segments))],
        "failover": [
            # the fixture's watermarks are years old: a lower bound with its age, never a current figure
            ("Records at risk (RPO)", f"≥ {at_risk}"),
            ("Consistent cut", fmt.moment(cut, int(time.time() * 1000)) if cut is not None else "unknown"),
            ("Lost by resuming (exact)", fmt.count(plan_lost)),
        ],
    }


def test_every_page_loads_shows_the_figures_sql_returns_and_no_password(
    page, dashboard: str, built: Built, screenshots: Path | None
):  # noqa: ANN001
    """One pass over the pages: each runs and draws; each page with figures shows what the same SQL
    returns; the config the dashboard reads holds a cluster's SASL password in its text, and that
    password is in no page's HTML or text."""
    figures = _figures(built)
    for p in PAGES:
        open_page(page, dashboard, p.slug, p.title)
        assert page.get_by_role("button", name="Deploy").count() == 0  # viewer mode: no developer toolbar
        # idle and drawn at once: a live rerun (a new lakehouse commit) may start after the page settled
        wait_for(lambda: idle(page) and drawn(page), f"{p.title} to be run and drawn", timeout_s=120)
        if screenshots is not None:
            page.screenshot(path=str(screenshots / f"{p.slug}.png"), full_page=True)
        assert cut_off(page) == [], f"{p.title}: cut off"
        html, text = page.content(), page.inner_text("body")
        assert CANARY not in html and CANARY not in text, f"the password is on the page {p.title}"
        for label, expected in figures.pop(p.slug, []):
            wait_metric(page, label, expected)
        if p.slug == "failover":
            page.get_by_text("Not measured for").first.wait_for()  # the lower bound's age, said
    assert not figures, f"pages with figures to check that the dashboard no longer has: {sorted(figures)}"


def _ground_truth(built: Built, partition: int, committed: int) -> int:
    """The exact translation from the offset syncs the test published (not from the lakehouse)."""
    points = [
        pt
        for e in built.events
        if e.event_type == "offset_sync" and e.partition == partition
        for pt in points_from_sync(
            e.upstream_offset, e.downstream_offset, e.reason, e.previous_upstream_offset, e.previous_downstream_offset
        )
    ]
    found = translate(build_segments(points), committed)
    assert found is not None
    return found.downstream


def test_translate_boxes_answer_the_ground_truth(page, dashboard: str, built: Built):  # noqa: ANN001
    open_page(page, dashboard, "mapping", "Offset mapping")
    for committed in (50, 101, 145, 185):
        expected = _ground_truth(built, 0, committed)
        box = page.get_by_label("Committed source offset")
        box.fill(str(committed))
        box.press("Enter")
        wait_metric(page, "Resumes on the target at", str(expected))
    reverse = page.get_by_label("Target offset")
    reverse.fill("154")  # the replayed copy of source offset 145 (delta 9 after the restart)
    reverse.press("Enter")
    wait_metric(page, "Copy of source offset", "145")


def test_as_of_selector_changes_every_page(page, dashboard: str, built: Built):  # noqa: ANN001
    first = builds(Lakehouse(built.config).history())[0]
    then = moment(first.at_ms)
    at_risk_now = _sql(built, "SELECT sum(records_unreplicated) FROM rpo_now('A->B')")
    at_risk_then = _sql(built, "SELECT sum(records_unreplicated) FROM rpo_now('A->B')", as_of=then)
    segments_then = _sql(built, "SELECT count(*) FROM offset_mapping WHERE partition = 0", as_of=then)
    segments_now = _sql(built, "SELECT count(*) FROM offset_mapping WHERE partition = 0")
    assert (at_risk_then, segments_then) != (at_risk_now, segments_now), "the first build must differ from the last"
    open_page(page, dashboard, "lag", "Lag and RPO")
    page.get_by_role("combobox", name="As of").click()
    page.get_by_role("option", name=f"Build {first.number} ·").first.click()
    settled(page)
    page.get_by_text("Time travel: this is the lakehouse as of").wait_for()
    wait_metric(page, "Records at risk", fmt.count(at_risk_then))
    page.get_by_role("link", name="Offset mapping").first.click()  # same session: the choice stays
    page.get_by_role("heading", name="Offset mapping").first.wait_for()
    settled(page)
    wait_metric(page, "Segments", fmt.count(segments_then))
    assert page.locator('[data-testid="stException"]').count() == 0
