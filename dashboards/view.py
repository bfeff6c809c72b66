"""What every page reads: the lakehouse (possibly as of a past build) and the moment it is judged at.

The sidebar builds one ``View`` per script run; pages get it as their only argument, so the
"as of" choice applies to every page alike. Relative times ("5 min ago") and the flow status are
judged at ``now_ms``: the wall clock for the live lakehouse, the chosen moment when travelling back.

Queries go through ``View.get(query_function, *args)``: answers are cached per lakehouse state
(root, "as of", and the newest Delta version of every table), so widget interactions and page
switches re-query nothing until a build commits; the DuckDB connection opens only on a cache miss.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, TypeVar

import streamlit as st

from dashboards.timetravel import signature
from ingest.paths import LakehousePaths
from lakehouse.catalog import table_paths
from lakehouse.sql import LakehouseSQL
from replicator.config import MirrorlakeConfig

__all__ = ["View", "open_view"]

T = TypeVar("T")


@st.cache_data(max_entries=1024, show_spinner=False)
def _cached(key: tuple, name: str, args: tuple, _fn: Callable[..., Any], _view: View) -> Any:
    return _fn(_view.sql, *args)


@dataclass
class View:
    config: MirrorlakeConfig
    now_ms: int
    as_of: int | datetime | None = None  # None: the lakehouse as it is now
    as_of_label: str | None = None
    configured_flows: list[str] = field(default_factory=list)
    state: tuple = ()  # changes with every commit to any table (cache key)

    @property
    def live(self) -> bool:
        return self.as_of is None

    @cached_property
    def sql(self) -> LakehouseSQL:
        """The DuckDB connection (opened on first use); ``MirrorlakeError`` for a bad lakehouse or "as of"."""
        return LakehouseSQL(LakehousePaths.of(self.config.lakehouse).root, as_of=self.as_of)

    def get(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(self.sql, *args)``, cached until the lakehouse changes (``args`` must be hashable)."""
        key = (str(self.config.lakehouse.path), str(self.as_of), self.state)
        return _cached(key, f"{fn.__module__}.{fn.__qualname__}", args, fn, self)

    def close(self) -> None:
        if "sql" in self.__dict__:
            self.sql.close()


def open_view(config: MirrorlakeConfig, as_of: int | datetime | None, label: str | None) -> View:
    """The view of ``config``'s lakehouse as of ``as_of`` (validated by opening it: ``MirrorlakeError``)."""
    moment = as_of.timestamp() if isinstance(as_of, datetime) else time.time()
    state = signature(table_paths(LakehousePaths.of(config.lakehouse)))
    flows = [f"{f.source}->{f.target}" for f in config.flows]
    view = View(config, int(moment * 1000), as_of, label, flows, state)
    if as_of is not None:
        view.sql  # noqa: B018 - an "as of" before every table is the user's mistake: say so at once
    return view
