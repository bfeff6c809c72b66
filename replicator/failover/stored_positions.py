"""Offsets an application stored itself, read from the shapes the tools of the field write.

Consumer groups have their offsets checkpointed by the flow; an application that keeps its own
(Spark Structured Streaming checkpoints, Flink state, a database table) has only a file to hand
over at a failover. ``parse_positions`` reads any of:

* JSON lines, one ``{"topic": ..., "partition": ..., "offset": ...}`` per line;
* a JSON array of such objects, or an object ``{"partitions": [...]}`` of them (the JSON of Kafka's
  ``kafka-delete-records``/reassignment tools);
* Spark's Kafka source offsets, ``{"topic": {"0": 123, "1": 456}}`` (a line of a checkpoint's
  ``offsets/N`` file);
* CSV lines ``topic,partition,offset`` (``kafka-consumer-groups --reset-offsets --export``).

Each position is the next record the application reads (Kafka's committed-offset convention).
Anything else is a ``TranslationError`` naming the line or key and what is wrong; nothing is guessed
(a negative offset, such as Spark's -2 for "earliest", names no record and is refused).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from typing import Any

from replicator.errors import TranslationError

__all__ = ["StoredPosition", "parse_positions"]


@dataclass(frozen=True, order=True)
class StoredPosition:
    """An application's position on the source: it reads ``offset`` next in ``topic[partition]``."""

    topic: str
    partition: int
    offset: int


def parse_positions(text: str, where: str = "offsets") -> list[StoredPosition]:
    """The positions ``text`` holds, sorted, one per partition; ``where`` names the input in errors."""
    stripped = text.strip()
    if not stripped:
        raise TranslationError(f"{where}: no positions (empty input)")
    if stripped[0] in "[{":
        try:
            whole = json.loads(stripped)
        except json.JSONDecodeError:
            whole = None  # JSON lines, read one by one below
        if whole is not None:
            return _unique(_from_json(whole, where), where)
        return _unique(_from_json_lines(stripped, where), where)
    return _unique(_from_csv(stripped, where), where)


def _from_json(whole: Any, where: str) -> list[StoredPosition]:
    if isinstance(whole, list):
        return [_from_object(item, f"{where}[{i}]") for i, item in enumerate(whole)]
    if not isinstance(whole, dict):
        raise TranslationError(f"{where}: expected a JSON object or array, got {type(whole).__name__}")
    if "partitions" in whole:
        items = whole["partitions"]
        if not isinstance(items, list):
            raise TranslationError(f"{where}.partitions: expected an array of topic/partition/offset objects")
        return [_from_object(item, f"{where}.partitions[{i}]") for i, item in enumerate(items)]
    if {"topic", "partition", "offset"} <= whole.keys():
        return [_from_object(whole, where)]
    return _from_spark(whole, where)


def _from_json_lines(text: str, where: str) -> list[StoredPosition]:
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TranslationError(f"{where} line {number}: not JSON ({exc.msg})") from exc
        out.append(_from_object(item, f"{where} line {number}"))
    return out


def _from_object(item: Any, where: str) -> StoredPosition:
    if not isinstance(item, dict):
        raise TranslationError(f"{where}: expected an object with topic, partition and offset")
    missing = [k for k in ("topic", "partition", "offset") if k not in item]
    if missing:
        raise TranslationError(f"{where}: missing {', '.join(missing)}")
    return _position(item["topic"], item["partition"], item["offset"], where)


def _from_spark(whole: dict[str, Any], where: str) -> list[StoredPosition]:
    out = []
    for topic, partitions in whole.items():
        if not isinstance(partitions, dict):
            raise TranslationError(
                f"{where}.{topic}: expected {{partition: offset}} (Spark's shape) or topic/partition/offset objects"
            )
        for partition, offset in partitions.items():
            out.append(_position(topic, partition, offset, f"{where}.{topic}.{partition}"))
    return out


def _from_csv(text: str, where: str) -> list[StoredPosition]:
    out = []
    for number, row in enumerate(csv.reader(text.splitlines()), start=1):
        if not row or not "".join(row).strip():
            continue
        if len(row) != 3:
            raise TranslationError(f"{where} line {number}: expected topic,partition,offset (got {len(row)} fields)")
        out.append(_position(row[0].strip(), row[1].strip(), row[2].strip(), f"{where} line {number}"))
    return out


def _position(topic: Any, partition: Any, offset: Any, where: str) -> StoredPosition:
    if not isinstance(topic, str) or not topic:
        raise TranslationError(f"{where}: topic must be a non-empty string, got {topic!r}")
    p, o = _integer(partition, "partition", where), _integer(offset, "offset", where)
    if p < 0:
        raise TranslationError(f"{where}: partition {p} is negative")
    if o < 0:
        raise TranslationError(f"{where}: offset {o} names no record (a stored position is the next offset to read)")
    return StoredPosition(topic, p, o)


def _integer(value: Any, name: str, where: str) -> int:
    if isinstance(value, bool):
        raise TranslationError(f"{where}: {name} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise TranslationError(f"{where}: {name} must be an integer, got {value!r}")


def _unique(positions: list[StoredPosition], where: str) -> list[StoredPosition]:
    seen: dict[tuple[str, int], int] = {}
    for p in positions:
        key = (p.topic, p.partition)
        if key in seen and seen[key] != p.offset:
            raise TranslationError(f"{where}: {p.topic}[{p.partition}] given twice ({seen[key]} and {p.offset})")
        seen[key] = p.offset
    if not seen:
        raise TranslationError(f"{where}: no positions")
    return sorted({StoredPosition(t, p, o) for (t, p), o in seen.items()})
