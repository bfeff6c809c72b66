"""Where each lakehouse table and streaming checkpoint lives under ``lakehouse.path``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["LakehousePaths"]


@dataclass(frozen=True)
class LakehousePaths:
    root: Path

    @property
    def bronze(self) -> Path:
        return self.root / "tables" / "bronze" / "events"

    @property
    def quarantine(self) -> Path:
        return self.root / "tables" / "bronze" / "quarantine"

    def silver(self, event_type: str) -> Path:
        return self.root / "tables" / "silver" / event_type

    def gold(self, name: str) -> Path:
        return self.root / "tables" / "gold" / name

    def checkpoint(self, name: str) -> Path:
        return self.root / "checkpoints" / name
