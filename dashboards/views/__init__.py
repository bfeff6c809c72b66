"""The dashboard's pages, in menu order; each module has ``render(view)``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dashboards.view import View
from dashboards.views import divergence, failover, groups, history, lag, mapping, overview

__all__ = ["Page", "PAGES"]


@dataclass(frozen=True)
class Page:
    title: str
    slug: str  # the URL path, e.g. http://127.0.0.1:8501/lag
    icon: str
    render: Callable[[View], None]


PAGES: tuple[Page, ...] = (
    Page("Overview", "overview", ":material/hub:", overview.render),
    Page("Lag and RPO", "lag", ":material/monitoring:", lag.render),
    Page("Offset mapping", "mapping", ":material/swap_horiz:", mapping.render),
    Page("Consumer groups", "groups", ":material/groups:", groups.render),
    Page("Divergence", "divergence", ":material/difference:", divergence.render),
    Page("Failover", "failover", ":material/switch_access_shortcut:", failover.render),
    Page("Time travel", "history", ":material/history:", history.render),
)
