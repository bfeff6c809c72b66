"""``${env:NAME}`` and ``${file:PATH}`` in client settings, so passwords need not sit in the config.

As Kafka's config providers: a value may contain references that are replaced when a client is
made, never when the config is loaded, printed or snapshotted (the model keeps the reference
text, a ``SecretStr``). ``${file:PATH}`` is the whole file without its trailing newline. A missing
variable or unreadable file is a ``ConfigError`` naming the setting and the variable or path, never
the value.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from replicator.errors import ConfigError

__all__ = ["resolve_references"]

_REFERENCE = re.compile(r"\$\{(env|file):([^}]+)\}")
MAX_SECRET_BYTES = 1024 * 1024  # a password, a key or a certificate chain; more is not a secret file


def resolve_references(value: str, *, setting: str) -> str:
    """``value`` with every ``${env:NAME}`` and ``${file:PATH}`` replaced by what it names."""

    def replace(match: re.Match[str]) -> str:
        kind, name = match.group(1), match.group(2)
        if kind == "env":
            if name not in os.environ:
                raise ConfigError(f"{setting}: environment variable {name} (from ${{env:{name}}}) is not set")
            return os.environ[name]
        try:
            with Path(name).expanduser().open("rb") as f:
                raw = f.read(MAX_SECRET_BYTES + 1)  # bounded: ${file:/dev/zero} never ends
        except OSError as exc:
            raise ConfigError(f"{setting}: cannot read {name} (from ${{file:...}}): {exc.strerror}") from None
        if len(raw) > MAX_SECRET_BYTES:
            raise ConfigError(f"{setting}: {name} (from ${{file:...}}) is larger than {MAX_SECRET_BYTES} bytes")
        try:
            return raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            raise ConfigError(f"{setting}: {name} (from ${{file:...}}) is not UTF-8 text") from None

    return _REFERENCE.sub(replace, value)
