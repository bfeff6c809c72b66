"""``replicator.events.validity``'s rules as one Spark expression per event type.

The rules are declared once (``replicator.events.validity.RULES``); this module only translates
each into a column condition and the same words, first broken rule first, so a forged event gets
one reason whichever engine read it. ``tests/test_event_validity.py`` holds ``invalid_reason``
equal to ``problem`` on generated events.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from replicator.events.validity import MAX_PARTITION, RULES, TOPIC_NAME_MAX, TOPIC_NAME_PATTERN, Rule

__all__ = ["invalid_reason"]

# \A and \z: Java's $ also matches before a final line terminator, so "t\n" would pass for a name
_TOPIC = rf"\A{TOPIC_NAME_PATTERN}{{1,{TOPIC_NAME_MAX}}}\z"


def _with_value(name: str, col: Column, words: str) -> Column:
    return F.concat(F.lit(f"{name} "), col.cast("string"), F.lit(words))


def _checks(event_type: str, rule: Rule) -> list[tuple[Column, Column]]:
    """(condition, reason) pairs of one rule, in the order ``Rule.message`` decides."""
    col, name = F.col(rule.field), f"{event_type}.{rule.field}"
    out: list[tuple[Column, Column]] = []
    if not rule.kind.endswith("_or_null"):
        out.append((col.isNull(), F.lit(f"{name} is missing")))
    present = col.isNotNull()
    if rule.kind == "topic":
        bad = ~col.rlike(_TOPIC) | col.isin(".", "..")
        out.append((present & bad, F.lit(f"{name} is not a legal Kafka topic name")))
    elif rule.kind == "partition":
        out.append(
            (
                present & ((col < 0) | (col > MAX_PARTITION)),
                _with_value(name, col, f" is not a partition (0 to {MAX_PARTITION})"),
            )
        )
    else:
        out.append((present & (col < 0), _with_value(name, col, " is negative")))
        if rule.at_most is not None:
            bound = F.col(rule.at_most)
            after = present & bound.isNotNull() & (col > bound)
            out.append((after, _with_value(name, col, f" is after {event_type}.{rule.at_most}")))
    return out


def invalid_reason(event_type: str) -> Column:
    """The first rule a row of ``event_type`` breaks, in words; null for a valid row (and for types without rules)."""
    checks = [check for rule in RULES.get(event_type, ()) for check in _checks(event_type, rule)]
    if not checks:
        return F.lit(None).cast("string")
    (cond, reason), *rest = checks
    expr = F.when(cond, reason)
    for cond, reason in rest:
        expr = expr.when(cond, reason)
    return expr
