"""A build's small records of progress (JSON beside the checkpoints), replaced whole or not at all.

The gold tables' consumed silver versions (``lakehouse.incremental``) and silver's bronze version
(``lakehouse.silver_progress``) are such records: a crash leaves the old one or the new one, never
half of either, so the next build redoes at most one step, which gives the same rows.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ingest.storage import s3_access

__all__ = ["load_state", "save_state"]


def load_state(path: Path) -> dict[str, Any] | None:
    """The record at ``path``; None when there is none yet."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return data


def save_state(path: Path, data: dict[str, Any]) -> None:
    """Replace the record whole: a rename on a disk (written and synced first), one PUT on S3 (atomic)."""
    text = json.dumps(data)
    if s3_access(path) is not None:  # an object store: no rename, a PUT replaces an object whole
        path.write_text(text, encoding="utf-8")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
