"""The configuration reference, generated from the config model: every key, its type, default and
description, so the documentation cannot drift from what ``parse_config`` accepts.

``docs/configuration-reference.md`` is this module's output (``make docs`` writes it; a test holds
the file equal to it).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from replicator.config.model import MirrorlakeConfig

__all__ = ["reference_markdown", "write_reference", "ReferenceRow", "rows"]

_TITLE = "# Configuration reference"
_INTRO = (
    "Every key of a mirrorlake YAML file, generated from the config model "
    "(`replicator/config/model.py`) by `make docs`; `tests/test_config_reference.py` keeps this file "
    "current. Unknown keys are refused. `[]` marks a list item, `<name>` a key you choose. "
    "Client settings accept `${env:NAME}` and `${file:PATH}` references."
)


class ReferenceRow(typing.NamedTuple):
    key: str
    type: str
    default: str
    description: str


def _model_of(annotation: Any) -> tuple[type[BaseModel] | None, str]:
    """The model a key holds (directly, in a tuple, or as a dict's values) and the key suffix."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, ""
    if origin is tuple and args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return args[0], "[]"
    if origin is dict and len(args) == 2 and isinstance(args[1], type) and issubclass(args[1], BaseModel):
        return args[1], ".<name>"
    return None, ""


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return " \\| ".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args if a is not type(None)) + " (optional)"
    if origin is tuple:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map of {_type_name(args[0])} to {_type_name(args[1])}"
    if annotation is Path:
        return "path"
    if annotation is float:
        return "number"
    if annotation is int:
        return "integer"
    if annotation is bool:
        return "boolean"
    if annotation is str:
        return "text"
    name = getattr(annotation, "__name__", str(annotation))
    return {"SecretStr": "text (secret)"}.get(name, name)


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if value is None or value is PydanticUndefined:
        return "none"
    if isinstance(value, BaseModel):
        return "(see below)"
    if isinstance(value, tuple):
        return ", ".join(f"`{v}`" for v in value) or "empty"
    if isinstance(value, dict):
        return "empty" if not value else f"`{value}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def rows(model: type[BaseModel] = MirrorlakeConfig, prefix: str = "") -> Iterator[ReferenceRow]:
    """Every key of ``model`` and of the models it holds, depth first, in declaration order."""
    hints = typing.get_type_hints(model)
    for name, field in model.model_fields.items():
        key = prefix + (field.alias or name)
        annotation = hints[name]
        inner, suffix = _model_of(annotation)
        description = (field.description or "").replace("|", "\\|")
        if inner is None:
            yield ReferenceRow(key, _type_name(annotation), _default(field), description)
            continue
        kind = {"[]": "list of sections", ".<name>": "map of sections"}.get(suffix, "section")
        yield ReferenceRow(key, kind, _default(field), description)
        yield from rows(inner, f"{key}{suffix}.")


def reference_markdown() -> str:
    """The reference as Markdown: one table of every key."""
    lines = [_TITLE, "", _INTRO, "", "| key | type | default | what it does |", "|---|---|---|---|"]
    lines += [f"| `{r.key}` | {r.type} | {r.default} | {r.description} |" for r in rows()]
    return "\n".join(lines) + "\n"


def write_reference(path: str | Path) -> None:
    """Write ``reference_markdown()`` to ``path``."""
    Path(path).write_text(reference_markdown(), encoding="utf-8")
