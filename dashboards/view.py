"""What every page reads: the lakehouse (possibly as of a past build) and the moment it is judged at.

The sidebar builds one ``View`` per script run; pages get it as their only argument, so the
"as of" choice applies to every page alike. Relative times ("5 min ago") and the flow status are
judged at ``now_ms``: the wall clock for the live lakehouse, the chosen moment when travelling back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime

from lakehouse.sql import LakehouseSQL
from replicator.config import MirrorlakeConfig

__all__ = ["View", "open_view"]


@dataclass
class View:
    config: MirrorlakeConfig
    sql: LakehouseSQL
    now_ms: int
    as_of: int | datetime | None = None  # None: the lakehouse as it is now
    as_of_label: str | None = None
    configured_flows: list[str] = field(default_factory=list)

    @property
    def live(self) -> bool:
        return self.as_of is None


def open_view(config: MirrorlakeConfig, as_of: int | datetime | None, label: str | None) -> View:
    """Open the lakehouse of ``config`` as of ``as_of``; raises ``MirrorlakeError`` subclasses on bad input."""
    sql = LakehouseSQL(config.lakehouse.path, as_of=as_of)
    moment = as_of.timestamp() if isinstance(as_of, datetime) else time.time()
    now_ms = int(moment * 1000)
    flows = [f"{f.source}->{f.target}" for f in config.flows]
    return View(config, sql, now_ms, as_of, label, flows)
