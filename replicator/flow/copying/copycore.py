"""Loading the compiled produce path (``_copycore``) and making its producer from a flow's settings.

The extension is built by ``pip install`` where gcc and librdkafka's header are present (setup.py);
it uses the librdkafka that confluent-kafka's wheel bundles, so a flow's consumer and its copy
producer run one client library. ``load_copycore`` says why it cannot be used, never guesses.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import confluent_kafka

from replicator.config import FlowConfig
from replicator.errors import ConfigError

__all__ = ["CopyCoreUnavailable", "bundled_librdkafka", "load_copycore", "core_settings", "copies_natively"]

_log = logging.getLogger(__name__)

# settings confluent-kafka's Python layer handles itself: the native producer does its own
_PYTHON_ONLY = frozenset({"error_cb", "logger", "stats_cb", "throttle_cb", "on_delivery", "on_commit"})


class CopyCoreUnavailable(RuntimeError):
    """The compiled produce path cannot run here (not built, or no bundled librdkafka)."""


def bundled_librdkafka() -> Path:
    """The librdkafka shared library confluent-kafka loaded (its wheel bundles one)."""
    libs = Path(confluent_kafka.__file__).resolve().parent.parent / "confluent_kafka.libs"
    found = sorted(libs.glob("librdkafka*.so*"))
    if not found:
        raise CopyCoreUnavailable(f"no librdkafka in {libs}: confluent-kafka is not installed from a manylinux wheel")
    return found[0]


def load_copycore() -> ModuleType:
    """The ``_copycore`` module with librdkafka's functions looked up (idempotent)."""
    try:
        module = importlib.import_module("replicator.flow.copying._copycore")
    except ImportError as exc:
        raise CopyCoreUnavailable(
            f"the compiled copy path is not built ({exc}); reinstall with gcc, python3-dev and librdkafka-dev "
            "present (scripts/bootstrap.sh installs them)"
        ) from exc
    try:
        module.load(str(bundled_librdkafka()))
    except ImportError as exc:
        raise CopyCoreUnavailable(str(exc)) from exc
    return module


def core_settings(conf: Mapping[str, Any]) -> list[tuple[str, str]]:
    """librdkafka settings as strings; a Python callable other than the ones the core replaces is refused
    (an OAUTHBEARER token callback, say, only works on the Python path)."""
    out = []
    for name, value in conf.items():
        if name in _PYTHON_ONLY:
            continue
        if callable(value):
            raise CopyCoreUnavailable(f"client setting {name} is a Python callable: the compiled path cannot call it")
        out.append((name, str(value).lower() if isinstance(value, bool) else str(value)))
    return out


def copies_natively(flow: FlowConfig) -> bool:
    """Whether ``flow`` copies on the compiled path: ``auto`` where it loads (exactly-once flows stay on
    Python's transactional producer), ``native`` insists (a ``ConfigError`` saying why it cannot)."""
    if flow.copy_engine == "python" or flow.exactly_once:
        return False
    try:
        load_copycore()
    except CopyCoreUnavailable as exc:
        if flow.copy_engine == "native":
            raise ConfigError(f"flow {flow.name}: copy_engine native: {exc}") from exc
        _log.warning("flow %s: copying on the Python path: %s", flow.name, exc)
        return False
    return True
