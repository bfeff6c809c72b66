"""The client core, MM2's ``connect-mirror-client`` counterpart: replication policies, the exact
offset mapping and translation, the provenance header, reading the state log and a group's
committed offsets. No flow runtime, no metrics server, no Spark: a consumer application that
fails over and every Spark worker that decodes events import only this (and ``replicator.events``).
"""

from __future__ import annotations

import importlib
from typing import Any

# what an application imports from the client core by name, loaded on first use (PEP 562), so that
# ``import replicator.client`` stays cheap for Spark workers that only decode events
_EXPORTS = {
    "FailoverConsumer": "replicator.client.failover_consumer",
    "Move": "replicator.client.failover_consumer",
    "MappingIndex": "replicator.client.mapping_index",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'replicator.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_EXPORTS))
