"""Name patterns (topics, groups, config properties, ``--groups``) compiled by RE2: linear time, always.

A pattern comes from a user's config or command line, and the names it is matched against come
from a cluster: ``(a+)+$`` against a topic of forty ``a`` then ``-x`` kept Python's backtracking
engine busy for minutes, holding the GIL, so not even SIGTERM's handler could run. RE2 (Google's
engine, PyPI ``google-re2``) matches in time linear in the name whatever the pattern, and refuses
the few constructs that need backtracking: backreferences, lookaround, atomic groups, possessive
quantifiers. MM2's users' patterns (``.*``, ``a|b``, ``topic-[0-9]+``, ``(?i)``, ``\\Q...\\E``,
``\\d``, POSIX classes) compile unchanged. A refused pattern is an error naming the construct.

Every pattern is matched against the whole name (Java's ``matches()``, as MM2 does).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol

import re2

__all__ = ["NamePattern", "UnsupportedPatternError", "compile_pattern", "compile_any"]

# RE2's error text -> what a user wrote, in their words
_BACKREFERENCE = re.compile(r"invalid escape sequence: \\[1-9]")
_CONSTRUCTS = (
    ("invalid perl operator: (?=", "a lookahead (?=...)"),
    ("invalid perl operator: (?!", "a negative lookahead (?!...)"),
    ("invalid perl operator: (?<=", "a lookbehind (?<=...)"),
    ("invalid perl operator: (?<!", "a negative lookbehind (?<!...)"),
    ("invalid perl operator: (?>", "an atomic group (?>...)"),
    ("bad repetition operator: *+", "a possessive quantifier (*+)"),
    ("bad repetition operator: ++", "a possessive quantifier (++)"),
    ("bad repetition operator: ?+", "a possessive quantifier (?+)"),
)
_LINEAR = "name patterns run on RE2, which matches in linear time and has no backreferences or lookaround"


class NamePattern(Protocol):
    def fullmatch(self, text: str) -> object | None: ...


class UnsupportedPatternError(ValueError):
    """A pattern RE2 cannot compile; the message names the construct and why it is refused."""


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # the error is raised, with its reason, rather than printed to stderr
    return options


def _explain(detail: str) -> str:
    if _BACKREFERENCE.match(detail):
        construct: str | None = "a backreference (\\1 ... \\9)"
    else:
        construct = next((c for needle, c in _CONSTRUCTS if detail.startswith(needle)), None)
    return f"{construct} is not supported ({_LINEAR})" if construct else detail


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> NamePattern:
    """``pattern`` compiled by RE2 (once per process); ``UnsupportedPatternError`` naming the construct
    it cannot take."""
    try:
        return re2.compile(pattern, options=_options())
    except re2.error as exc:
        raw = exc.args[0] if exc.args else str(exc)
        detail = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        raise UnsupportedPatternError(f"{pattern!r}: {_explain(detail)}") from None


def compile_any(patterns: Sequence[str]) -> NamePattern | None:
    """One pattern matching what any of ``patterns`` matches whole (None when there are none)."""
    if not patterns:
        return None
    for pattern in patterns:
        compile_pattern(pattern)  # the error names the one pattern at fault, not the alternation
    return compile_pattern("|".join(f"(?:{p})" for p in patterns))
