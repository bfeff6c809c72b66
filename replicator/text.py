"""Text from a cluster or the state topic, made safe to show: control characters escaped, length capped.

A group named ``ESC ] 0 ; ... BEL`` retitled the operator's terminal from an ``error:`` line, and a
topic name with a newline forged rows of a table. Whatever came from outside (names, reasons,
cells) reaches a terminal through ``printable``: C0 and C1 control characters (newline and tab
included: one value never spans lines), DEL and the bidirectional overrides become visible escapes
(``\\x1b``, ``\\u202e``), and a value longer than ``limit`` is cut with its length said.
"""

from __future__ import annotations

import re

__all__ = ["printable", "ERROR_LIMIT"]

ERROR_LIMIT = 2000  # characters of one error line: a message, not a dump of what was given
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, limit: int | None = None) -> str:
    """``text`` with every control and direction-changing character escaped; cut at ``limit`` characters."""
    out = _UNSAFE.sub(_escape, text)
    if limit is not None and len(out) > limit:
        return f"{out[:limit]}... ({len(out)} characters)"
    return out
