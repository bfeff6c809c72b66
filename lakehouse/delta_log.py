"""Is a Delta table's log whole? Checked by reading files (no Spark, no DuckDB), naming the bad one.

A reader of a Delta table reads the checkpoint ``_delta_log/_last_checkpoint`` names and every JSON
commit after it. A commit cut short (a full disk, a copy interrupted, a hand edit) or a checkpoint
removed while the commits before it are gone too makes every later build or query fail deep inside
Spark or DuckDB; this check finds it first and says which table and which file.

Repair: every table derives from the state topics, so moving the lakehouse directory aside and
running ``mirrorlake lakehouse build`` again rebuilds the same tables from the state events
(bronze's stream checkpoints live in the same directory, so the rebuild reads each state topic
from its start). The events themselves are never in the lakehouse only.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = ["delta_log_problem", "REPAIR_HINT"]

REPAIR_HINT = (
    "; to repair, move the lakehouse directory aside and run `mirrorlake lakehouse build` "
    "(every table is rebuilt from the state topics)"
)

_COMMIT = re.compile(r"^(\d{20})\.json$")


def delta_log_problem(table: Path) -> str | None:
    """Why ``table``'s Delta log cannot be read, naming the file; None if what a reader reads is whole.

    Checked: ``_last_checkpoint`` parses and the checkpoint it names exists (or, if not, every
    commit from version 0 up to it is there to replay instead); every line of each JSON commit
    after the checkpoint is a JSON object. A table without a ``_delta_log`` is not checked.
    """
    log = table / "_delta_log"
    if not log.is_dir():
        return None
    commits = {int(m.group(1)): log / m.group(0) for p in log.iterdir() if (m := _COMMIT.match(p.name))}
    after = -1
    pointer = log / "_last_checkpoint"
    if pointer.is_file():
        try:
            info = json.loads(pointer.read_text())
            version = int(info["version"])
        except (ValueError, KeyError, TypeError) as exc:
            return f"{pointer}: not a checkpoint pointer ({type(exc).__name__}: {exc})"
        if _checkpoint_present(log, version, info.get("parts")):
            after = version
        elif any(v not in commits for v in range(version + 1)):
            return (
                f"{log / f'{version:020d}.checkpoint.parquet'}: checkpoint of version {version} is missing "
                "(named by _last_checkpoint) and the commits before it are gone too"
            )
    for version in sorted(v for v in commits if v > after):
        path = commits[version]
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                action = json.loads(line)
            except ValueError as exc:
                return f"{path}: line {number} is not JSON (Truncated or corrupt commit: {exc})"
            if not isinstance(action, dict):
                return f"{path}: line {number} is not a JSON object"
    return None


def _checkpoint_present(log: Path, version: int, parts: object) -> bool:
    prefix = f"{version:020d}.checkpoint"
    if isinstance(parts, int) and parts > 1:
        return all((log / f"{prefix}.{i:010d}.{parts:010d}.parquet").is_file() for i in range(1, parts + 1))
    return any(log.glob(f"{prefix}*.parquet")) or any(log.glob(f"{prefix}.*.json"))
