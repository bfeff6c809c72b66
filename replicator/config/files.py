"""Reading a configuration file's text, whatever its format: bounded, and every failure one
``ConfigError`` naming the file (YAML and MM2 properties both read through here)."""

from __future__ import annotations

from pathlib import Path

from replicator.errors import ConfigError

__all__ = ["MAX_CONFIG_BYTES", "read_config_text"]

MAX_CONFIG_BYTES = 10 * 1024 * 1024  # a configuration is a few KB; a bigger file is not one


def read_config_text(path: Path, *, encoding: str) -> str:
    """The file's text; ``ConfigError`` naming ``path`` if it is missing, unreadable, too big or not text."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read configuration file: {exc.strerror}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES // (1024 * 1024)} MiB: not a configuration file")
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.start + 1].hex()
        raise ConfigError(f"{path}: not UTF-8 text (byte 0x{bad} at offset {exc.start})") from None
