"""The config options every command shares: ``--config`` and the positional CONFIG some commands
take, and which file a command reads when given both, either or none. ``mirrorlake.cli`` and the
command modules it registers (``cli_check``, ...) import them from here, never from each other."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

__all__ = ["DEFAULT_CONFIG", "config_option", "config_argument_or_option", "pick_config", "stale_after_option"]

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_CONFIG = os.environ.get("MIRRORLAKE_CONFIG", "conf/local.yaml")


def config_option(func: F) -> F:
    return click.option(
        "--config",
        "-c",
        "config_path",
        default=DEFAULT_CONFIG,
        show_default=True,
        type=click.Path(dir_okay=False, path_type=Path),
        help="configuration file (YAML)",
    )(func)


def config_argument_or_option(func: F) -> F:
    """``--config PATH`` like every command, and the positional CONFIG these commands always took."""

    func = click.argument(
        "positional_config", metavar="[CONFIG]", required=False, type=click.Path(dir_okay=False, path_type=Path)
    )(func)
    return click.option(
        "--config",
        "-c",
        "option_config",
        default=None,
        type=click.Path(dir_okay=False, path_type=Path),
        help=f"configuration file (YAML or MM2 .properties)  [default: {DEFAULT_CONFIG}]",
    )(func)


def pick_config(positional: Path | None, option: Path | None) -> Path:
    if positional is not None and option is not None and positional != option:
        raise click.UsageError(f"two configuration files given: {positional} and --config {option}; give one")
    return positional or option or Path(DEFAULT_CONFIG)


stale_after_option = click.option(
    "--stale-after",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="a replicator of the flow silent this long (s) counts as stopped",
)
