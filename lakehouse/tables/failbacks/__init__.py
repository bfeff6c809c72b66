"""Gold ``failbacks``' contract: every failback step applied, one row each."""

from __future__ import annotations

from lakehouse.tables.spec import GoldSpec

__all__ = ["SPEC", "KEY"]

KEY = ("flow",)

SPEC = GoldSpec(name="failbacks", key=KEY, row_id=("failback_event_id",), sources=("failback",))
