"""The live demo read live, as an operator would (issue 38 items 1-3): `mirrorlake demo --live`.

The demo runs for real on clusters of its own (free ports, a work dir of the test's): traffic with
bursts and transactions, two groups, the replicator, the observer, ``lakehouse serve`` (a refresh
every 10 s) and the dashboard, driven by headless Chromium. Judged as a person would see it:

* a running flow is green, its figures move from one refresh to the next, the heartbeat paths and
  the history charts have something in them;
* the incident: the replicator stopped. The observer keeps watermarks flowing, so the records at
  risk the Failover page shows keep rising while nothing is copied (the figure stays true), and the
  flow's status says every process stopped; started again, the figures fall back.

Screenshots of each page go to ``$MIRRORLAKE_SCREENSHOTS`` (the README's come from
``MIRRORLAKE_SCREENSHOTS=docs/screenshots``), named ``live-<page>.png`` and
``live-incident-failover.png``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from dashboards.views import PAGES
from mirrorlake.live.demo import LiveDemo
from mirrorlake.localkafka import down
from mirrorlake.localkafka.ports import find_free_port_pair
from mirrorlake.progress import Steps
from replicator.config import load_config
from tests.bind_race import on_new_ports_after_a_bind_race
from tests.browser_support import chromium_page, cut_off, drawn, idle, metric, open_page, screenshot, screenshot_dir
from tests.dashboard_support import free_port
from tests.waiting import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.browser]

FLOW = "A->B"


def _start(work: Path) -> LiveDemo:
    """The demo on clusters at ports found free now, its files under ``work``."""
    work.mkdir(parents=True)
    a = find_free_port_pair()
    b = find_free_port_pair({a, a + 1})
    config_path = work / "live.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "clusters": {alias: {"bootstrap_servers": f"127.0.0.1:{port}"} for alias, port in (("A", a), ("B", b))},
                "flows": [
                    {
                        "source": "A",
                        "target": "B",
                        "topics": ["orders", "payments"],
                        "watermarks_interval_seconds": 2,
                        "emit_checkpoints_interval_seconds": 2,
                    }
                ],
                "status_port": free_port(),
                "lakehouse": {"path": str(work / "lakehouse")},
                "local_kafka": {"work_dir": str(work / "clusters")},
                "spark": {"conf": {"spark.ui.enabled": "false"}},
            }
        )
    )
    demo = LiveDemo(config_path, load_config(config_path), free_port())
    try:
        demo.start(Steps(rich=False))
    except BaseException:
        down(demo.config)
        raise
    return demo


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveDemo]:
    work = tmp_path_factory.mktemp("live")
    # its brokers start beside other workers' JVMs, which can take a port between the check and the bind
    demo = on_new_ports_after_a_bind_race(lambda attempt: _start(work / f"attempt-{attempt}"), "the live demo")
    try:
        yield demo
    finally:
        demo.stop()
        down(demo.config)


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return screenshot_dir(tmp_path_factory, "live dashboard")


@pytest.fixture(scope="module")
def page(live: LiveDemo):  # noqa: ANN201 - playwright's Page
    yield from chromium_page()


def _url(live: LiveDemo) -> str:
    return f"http://127.0.0.1:{live.port}"


def _show(page, live: LiveDemo, title: str) -> str:  # noqa: ANN001
    """Open the page titled ``title``, wait until it is run and drawn; its text."""
    (p,) = [p for p in PAGES if p.title == title]
    open_page(page, _url(live), p.slug, p.title)
    wait_for(lambda: idle(page) and drawn(page), f"{title} to be run and drawn", timeout_s=120)
    return page.inner_text("body")


def _number(text: str) -> int | None:
    """The first number in a metric's text ("1,234", "≥ 1,234 records"); None when it shows none."""
    found = re.search(r"\d[\d,]*", text)
    return int(found.group().replace(",", "")) if found else None


def _status(text: str) -> str:
    """The flow's status line on the Overview: ``A->B · green · <reason>``."""
    line = next((ln for ln in text.splitlines() if ln.startswith(FLOW)), "")
    return line


def _as_of(page) -> float | None:  # noqa: ANN001
    """The Failover page's "as of" of the records at risk, in seconds since the epoch (None: not shown)."""
    found = re.search(r"as of (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC", page.inner_text("body"))
    if found is None:
        return None
    return datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()


def test_a_running_flow_is_green_and_its_figures_move(page, live: LiveDemo, screenshots: Path):  # noqa: ANN001
    seen: list[str] = []

    def copying() -> bool:
        text = _show(page, live, "Overview")
        seen.append(_status(text))
        rate = _number(metric(page, "Records/s"))
        return "green" in seen[-1] and rate is not None and rate > 0

    try:
        wait_for(copying, "the flow green and copying on the Overview", timeout_s=240, every_s=5)
    except AssertionError as exc:  # what the page said instead, for the one reading a CI log
        raise AssertionError(f"{exc}; the last statuses seen: {seen[-4:]}") from None
    first = {label: metric(page, label) for label in ("Records/s", "Last heartbeat", "Last offset sync")}
    assert "No heartbeat observed yet" not in page.inner_text("body")  # the heartbeat paths box has rows

    def moved() -> bool:
        _show(page, live, "Overview")
        now = {label: metric(page, label) for label in first}
        return now != first

    wait_for(moved, "the Overview's figures to move with the next refresh", timeout_s=120, every_s=5)
    for p in PAGES:
        _show(page, live, p.title)
        assert cut_off(page) == [], f"{p.title}: cut off"
        screenshot(page, screenshots / f"live-{p.slug}.png")


def test_with_the_replicator_stopped_the_records_at_risk_keep_rising(page, live: LiveDemo, screenshots: Path):  # noqa: ANN001
    replicator = live.parts()["replicator"]
    assert replicator.stop()
    stopped_at = time.time()
    try:
        at_risk: list[int] = []

        def rising() -> bool:
            _show(page, live, "Failover")
            value = _number(metric(page, "Records at risk (RPO)"))
            if value is not None and (not at_risk or value != at_risk[-1]):
                at_risk.append(value)
            # and the figures' "as of" (their oldest partition's observation) after the stop: the
            # observer watermarks every partition the replicator did, its heartbeats too (however
            # late gold shows it on a loaded machine)
            as_of = _as_of(page)
            observed_since = as_of is not None and as_of > stopped_at + 1
            return len(at_risk) >= 3 and at_risk[-1] > at_risk[-2] > at_risk[-3] and observed_since

        wait_for(
            rising,
            "the records at risk to rise while nothing is copied, as observed after the stop",
            timeout_s=300,
            every_s=5,
        )
        screenshot(page, screenshots / "live-incident-failover.png")
        wait_for(
            lambda: "stopped" in _status(_show(page, live, "Overview")),
            "the Overview to say the flow's processes stopped",
            timeout_s=60,
            every_s=5,
        )
    finally:
        replicator.start()

    def recovered() -> bool:
        _show(page, live, "Failover")
        value = _number(metric(page, "Records at risk (RPO)"))
        return value is not None and value < at_risk[-1]

    wait_for(recovered, "the records at risk to fall once the replicator copies again", timeout_s=180, every_s=5)
