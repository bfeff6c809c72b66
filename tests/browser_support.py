"""Driving the dashboard with a real browser: Debian's Chromium through Playwright, and the waits a
Streamlit page needs before what it shows can be read (the script finished, graphs and tables drawn)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dashboards.views import PAGES
from tests.waiting import wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 60_000


def screenshot_dir(tmp_path_factory: pytest.TempPathFactory, what: str) -> Path:
    """Where screenshots go: ``$MIRRORLAKE_SCREENSHOTS`` (e.g. ``docs/screenshots`` for the README's),
    else a directory of the run's, named in the output."""
    where = os.environ.get("MIRRORLAKE_SCREENSHOTS")
    path = Path(where) if where else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    print(f"{what} screenshots in {path}")
    return path


def chromium_page() -> Iterator:
    """A page of headless Chromium (Debian's, driven by Playwright), closed after the ``yield``."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make setup` (scripts/bootstrap.sh installs Debian's chromium)")
    with sync_playwright() as pw, tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1440, "height": 1500},
        )
        context.set_default_timeout(TIMEOUT_MS)
        try:
            yield context.new_page()
        finally:
            context.close()


def idle(page) -> bool:  # noqa: ANN001
    """Streamlit is not running the script (no "Running..."/Stop status, no stale elements)."""
    return (
        page.locator('[data-testid="stStatusWidget"]').count() == 0 and page.locator('[data-stale="true"]').count() == 0
    )


def settled(page) -> None:  # noqa: ANN001
    """Wait until Streamlit finished running the script."""
    page.wait_for_selector('[data-testid="stApp"]')
    wait_for(lambda: idle(page), "the dashboard to finish running", timeout_s=60)


def open_page(page, url: str, slug: str, title: str) -> None:  # noqa: ANN001
    page.goto(f"{url}/" if slug == PAGES[0].slug else f"{url}/{slug}")  # the first page is the app's root
    page.get_by_role("heading", name=title, level=1).wait_for()  # the page's title, not the sidebar's heading
    settled(page)
    assert page.locator('[data-testid="stException"]').count() == 0, page.inner_text("body")


def drawn(page) -> bool:  # noqa: ANN001
    """Graphs and tables are drawn in the browser after the script ends: wait for them before a screenshot."""
    graphs = page.locator('[data-testid="stGraphVizChart"]').count()
    tables = page.locator('[data-testid="stDataFrame"]').count()
    return (
        page.locator('[data-testid="stGraphVizChart"] svg').count() >= graphs
        and page.locator('[data-testid="stDataFrame"] canvas').count() >= tables
    )


def metric(page, label: str) -> str:  # noqa: ANN001
    found = page.locator('[data-testid="stMetric"]').filter(has=page.get_by_text(label, exact=True))
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        return found.first.locator('[data-testid="stMetricValue"]').inner_text(timeout=2_000).strip()
    except PlaywrightTimeout:
        return f"<no metric {label!r} on the page>"


def wait_metric(page, label: str, expected: str) -> None:  # noqa: ANN001
    seen: list[str] = []

    def shows() -> bool:
        seen.append(metric(page, label))
        return seen[-1] == expected

    try:
        wait_for(shows, f"metric {label!r} to show {expected!r}", timeout_s=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; it shows {seen[-1:]}") from None


_CUT_OFF_JS = """() => [...document.querySelectorAll(
    '[data-testid="stMetricValue"], [data-testid="stMetricValue"] *, [data-testid="stMetricLabel"] *'
)].filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.innerText.trim()).filter(t => t)"""


def cut_off(page) -> list[str]:  # noqa: ANN001
    """The metric labels and values the page draws cut short (CSS ends them with an ellipsis: the
    whole text is still in the page, so only the drawn width tells)."""
    return sorted(set(page.evaluate(_CUT_OFF_JS)))


def screenshot(page, path: Path, attempts: int = 5) -> None:  # noqa: ANN001
    """A screenshot of the page run and drawn: taken again when a live rerun (a new lakehouse commit)
    started while it was taken, which shows a page half redrawn."""
    for _ in range(attempts):
        wait_for(lambda: idle(page) and drawn(page), "the page to be run and drawn", timeout_s=120)
        page.screenshot(path=str(path), full_page=True)
        if idle(page):
            return
