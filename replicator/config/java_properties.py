"""Java ``.properties`` text, read exactly as ``java.util.Properties.load`` reads it."""

from __future__ import annotations

import re

from replicator.errors import ConfigError

__all__ = ["parse_properties", "JAVA_TRIM", "CHAR_ESCAPES"]

_PROPS_WS = " \t\f"
JAVA_TRIM = "".join(chr(c) for c in range(33))  # String.trim(): every char <= ' '
_NATURAL_LINES = re.compile(r"\r\n|\r|\n")
CHAR_ESCAPES = {"t": "\t", "r": "\r", "n": "\n", "f": "\f"}


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, logical line) as ``Properties.LineReader`` joins natural lines."""
    lines: list[tuple[int, str]] = []
    naturals, ends = _NATURAL_LINES.split(text), _NATURAL_LINES.findall(text)
    buf, start = "", 0
    for i, line in enumerate(naturals):
        stripped = line.lstrip(_PROPS_WS)  # also the leading blanks of a continuation line
        if not buf:
            if not stripped or stripped[0] in "#!":
                continue  # blank or comment line; a comment never continues
            start = i + 1
        if (len(stripped) - len(stripped.rstrip("\\"))) % 2 == 0:
            lines.append((start, buf + stripped))
            buf = ""
            continue
        buf += stripped[:-1]  # an unescaped backslash joins the next natural line...
        # ...unless the file ends there or right after its \n or \r (not \r\n): then the line ends, even if empty
        if i == len(naturals) - 1 or (i == len(naturals) - 2 and not naturals[-1] and ends[i] != "\r\n"):
            lines.append((start, buf))
            buf = ""
    return lines


def _unescape(raw: str, number: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        char = raw[i]
        i += 1
        if char != "\\" or i == len(raw):
            out.append(char)
            continue
        char = raw[i]
        i += 1
        if char == "u":
            digits = raw[i : i + 4]
            if len(digits) < 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(f"line {number}: malformed \\uxxxx encoding")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(CHAR_ESCAPES.get(char, char))
    # Java strings are UTF-16: an escaped surrogate pair is one character.
    return "".join(out).encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text exactly as ``java.util.Properties.load`` does; the last duplicate wins.

    A key ends at the first unescaped ``=``, ``:`` or blank; blanks and one ``=``/``:`` after it are
    skipped; the rest of the logical line, trailing blanks included, is the value. ``#`` and ``!``
    start a comment only as a line's first non-blank character. Raises ``ConfigError`` for a malformed
    ``\\uXXXX`` escape.
    """
    props: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key_end, value_start, has_sep, escaped = len(line), len(line), False, False
        for i, char in enumerate(line):
            if not escaped and char in "=:":
                key_end, value_start, has_sep = i, i + 1, True
                break
            if not escaped and char in _PROPS_WS:
                key_end, value_start = i, i + 1
                break
            escaped = char == "\\" and not escaped
        while value_start < len(line):
            char = line[value_start]
            if char not in _PROPS_WS:
                if has_sep or char not in "=:":
                    break
                has_sep = True
            value_start += 1
        props[_unescape(line[:key_end], number)] = _unescape(line[value_start:], number)
    return props
