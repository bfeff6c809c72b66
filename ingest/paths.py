"""Where each lakehouse table and streaming checkpoint lives under ``lakehouse.path``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from ingest.storage import config_error, lakehouse_root, s3_access
from replicator.config.model import LakehouseConfig
from replicator.errors import ConfigError

__all__ = ["LakehousePaths", "ensure_writable_root"]


def ensure_writable_root(root: Path) -> Path:
    """Create ``root`` if needed and prove it writable (a probe file made and removed), before Spark starts.

    Raises ``ConfigError`` naming ``lakehouse.path`` and the reason when the directory cannot be
    created or written: a path through a file, a read-only or pseudo file system (what denies root
    too, where permission bits do not); on S3, refused credentials, a missing bucket or an endpoint
    that does not answer.
    """
    probe = root / f".mirrorlake-write-probe-{uuid.uuid4().hex}"
    if s3_access(root) is not None:  # no mkdir: s3fs would create a missing bucket
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except Exception as exc:  # botocore's and s3fs' errors have no common base  # noqa: BLE001
            raise config_error(str(root), exc) from None
        return root
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"lakehouse.path: cannot write to {root}: {exc.strerror or exc}") from None
    return root


@dataclass(frozen=True)
class LakehousePaths:
    """``root`` is a ``Path``, or an S3 ``UPath`` (``ingest.storage``) with pathlib's API."""

    root: Path

    @classmethod
    def of(cls, config: LakehouseConfig) -> LakehousePaths:
        """The lakehouse ``config.path`` names (an S3 one opened with ``config.s3``)."""
        return cls(lakehouse_root(config))

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
