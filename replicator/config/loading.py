"""Loading a configuration file: mirrorlake's YAML, or MirrorMaker 2's properties translated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from replicator.config.files import MAX_CONFIG_BYTES, read_config_text
from replicator.config.mm2_properties import load_mm2_properties
from replicator.config.model import MirrorlakeConfig, parse_config
from replicator.config.strimzi import is_strimzi_resource, strimzi_to_config_dict
from replicator.errors import ConfigError

__all__ = ["load_config", "MAX_CONFIG_BYTES"]


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping (PyYAML keeps the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if isinstance(key, str | int | float | bool) and key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_config(path: str | Path) -> MirrorlakeConfig:
    """Read and validate a YAML config file; relative paths inside stay relative to the CWD.

    A ``*.properties`` path is MirrorMaker 2's ``connect-mirror-maker.properties``, translated by
    ``replicator.config.mm2_properties``; a YAML document of kind ``KafkaMirrorMaker2`` is Strimzi's
    resource, translated by ``replicator.config.strimzi``.
    """
    path = Path(path)
    if path.name.endswith(".properties"):
        return load_mm2_properties(path)
    text = read_config_text(path, encoding="utf-8")
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {_yaml_reason(exc)}") from None
    except RecursionError:  # PyYAML composes nested collections recursively
        raise ConfigError(f"{path}: not a configuration: its YAML is nested too deeply") from None
    if is_strimzi_resource(data):
        return parse_config(strimzi_to_config_dict(data, source=str(path)), source=str(path))
    return parse_config(data, source=str(path))


def _yaml_reason(exc: yaml.YAMLError) -> str:
    """PyYAML's problem and where, on one line (its ``str`` spreads context over several)."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem is None:
        return " ".join(str(exc).split())
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return f"{problem}{where}"
