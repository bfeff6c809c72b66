"""Loading a configuration file: mirrorlake's YAML, or MirrorMaker 2's properties translated."""

from __future__ import annotations

from pathlib import Path

import yaml

from replicator.config.mm2_properties import load_mm2_properties
from replicator.config.model import MirrorlakeConfig, parse_config
from replicator.errors import ConfigError

__all__ = ["load_config"]


def load_config(path: str | Path) -> MirrorlakeConfig:
    """Read and validate a YAML config file; relative paths inside stay relative to the CWD.

    A ``*.properties`` path is MirrorMaker 2's ``connect-mirror-maker.properties``, translated by
    ``replicator.config.mm2_properties``.
    """
    path = Path(path)
    if path.name.endswith(".properties"):
        return load_mm2_properties(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read configuration file: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    return parse_config(data, source=str(path))
