"""Avro single-object encoding of events, and the registry of every schema version ever shipped.

Wire format (Avro spec, "Single object encoding"): ``C3 01`` + the writer schema's CRC-64-AVRO
fingerprint (8 bytes, little endian) + the Avro binary body. One topic carries every event type;
a reader finds the writer schema by fingerprint and resolves it to the newest version of that
type, which is what makes old events readable after a schema evolves.

Evolution rule: a released ``<type>.v<N>.avsc`` is never edited. A change is a new file
``v<N+1>`` that the newest reader can use to read every older version (new fields need defaults,
no field changes type incompatibly). ``tests/test_event_schemas.py`` enforces both.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import fastavro
from fastavro.read import SchemaResolutionError
from fastavro.schema import fingerprint, parse_schema, to_parsing_canonical_form

from replicator.errors import EventDecodeError, InvalidEventError
from replicator.events.model import EVENT_TYPES, Event
from replicator.events.validity import INVALID_PREFIX, problem

__all__ = [
    "SchemaVersion",
    "SchemaRegistry",
    "registry",
    "encode",
    "decode",
    "header_fingerprint",
    "MAGIC",
    "HEADER_LEN",
]

MAGIC = b"\xc3\x01"
# What fastavro raises for a truncated or corrupt body.
_CORRUPT_BODY = (
    EOFError,
    ValueError,
    IndexError,
    KeyError,
    TypeError,
    UnicodeDecodeError,
    SchemaResolutionError,
)
HEADER_LEN = len(MAGIC) + 8  # marker + 8-byte fingerprint; the Avro body follows


def header_fingerprint(data: bytes | None) -> bytes | None:
    """The schema fingerprint of a single-object encoded record, or None if it is not one.

    The one place that knows the header's layout (Spark's ``lakehouse.decode.classify`` takes
    ``MAGIC`` and ``HEADER_LEN`` from here).
    """
    if data is None or len(data) < HEADER_LEN or data[:2] != MAGIC:
        return None
    return bytes(data[len(MAGIC) : HEADER_LEN])


@dataclass(frozen=True)
class SchemaVersion:
    event_type: str
    version: int
    schema: dict[str, Any]  # the raw JSON document, as shipped
    parsed: Any  # fastavro's parsed form
    fingerprint: bytes  # 8 bytes, little endian CRC-64-AVRO of the canonical form


class SchemaRegistry:
    """All shipped schema versions, keyed by fingerprint and by (type, version)."""

    def __init__(self, versions: list[SchemaVersion]) -> None:
        self._by_fp = {v.fingerprint: v for v in versions}
        self._by_type: dict[str, dict[int, SchemaVersion]] = {}
        for v in versions:
            self._by_type.setdefault(v.event_type, {})[v.version] = v
        self._latest = {t: by_version[max(by_version)] for t, by_version in self._by_type.items()}

    @classmethod
    def from_package(cls) -> SchemaRegistry:
        root = resources.files("replicator.events") / "schemas"
        versions = []
        for entry in sorted(root.iterdir(), key=lambda e: e.name):
            if entry.name.endswith(".avsc"):
                versions.append(load_schema_version(entry.name, entry.read_text(encoding="utf-8")))
        return cls(versions)

    def event_types(self) -> list[str]:
        return sorted(self._by_type)

    def versions(self, event_type: str) -> list[SchemaVersion]:
        return [v for _, v in sorted(self._by_type[event_type].items())]

    def latest(self, event_type: str) -> SchemaVersion:
        return self._latest[event_type]

    def by_fingerprint(self, fp: bytes) -> SchemaVersion | None:
        return self._by_fp.get(fp)


def load_schema_version(filename: str, text: str) -> SchemaVersion:
    """Parse ``<type>.v<N>.avsc``; the type and version come from the file name."""
    stem = filename.removesuffix(".avsc")
    event_type, _, version = stem.rpartition(".v")
    if not event_type or not version.isdigit():
        raise ValueError(f"schema file {filename!r} is not named <event_type>.v<N>.avsc")
    doc = json.loads(text)
    # Marked as parsed (fastavro's write hint): schemaless_reader/writer re-parse an unmarked
    # schema on every call, which was most of the cost of decoding an event (~2-3x slower).
    parsed = parse_schema(doc)
    fp = bytes.fromhex(fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO"))
    return SchemaVersion(event_type, int(version), doc, parsed, fp)


@cache
def registry() -> SchemaRegistry:
    """The registry of the schemas shipped in this package (loaded once per process)."""
    return SchemaRegistry.from_package()


def encode(event: Event, reg: SchemaRegistry | None = None) -> bytes:
    """Single-object encode ``event`` with the newest schema of its type."""
    reg = reg or registry()
    sv = reg.latest(event.event_type)
    record = event.to_record()
    record["event_type"] = sv.event_type
    record["schema_version"] = sv.version
    buf = io.BytesIO()
    buf.write(MAGIC)
    buf.write(sv.fingerprint)
    fastavro.schemaless_writer(buf, sv.parsed, record)
    return buf.getvalue()


def decode_record(data: bytes, reg: SchemaRegistry | None = None) -> tuple[SchemaVersion, dict[str, Any]]:
    """Decode to (writer schema version, record resolved to the newest schema of that type).

    Raises ``EventDecodeError`` naming what is wrong: not single-object encoded, an unknown
    fingerprint (an event from a newer mirrorlake, or not ours), or a body that does not parse;
    ``InvalidEventError`` (one of those) for a record that breaks ``replicator.events.validity``.
    """
    reg = reg or registry()
    fp = header_fingerprint(data)
    if fp is None:
        head = (data or b"")[:2].hex() or "empty"
        raise EventDecodeError(f"not an Avro single-object encoded event (starts with {head})")
    writer = reg.by_fingerprint(fp)
    if writer is None:
        raise EventDecodeError(f"unknown schema fingerprint {fp.hex()}")
    reader = reg.latest(writer.event_type)
    body = io.BytesIO(data[HEADER_LEN:])
    try:
        record = fastavro.schemaless_reader(body, writer.parsed, reader.parsed if reader is not writer else None)
    except _CORRUPT_BODY as exc:
        raise EventDecodeError(
            f"{writer.event_type} v{writer.version}: body does not decode: {type(exc).__name__}: {exc}"
        ) from exc
    if body.tell() != len(data) - HEADER_LEN:
        raise EventDecodeError(f"{writer.event_type} v{writer.version}: trailing bytes after the body")
    if not isinstance(record, dict):
        raise EventDecodeError(f"{writer.event_type} v{writer.version}: body is not a record")
    invalid = problem(writer.event_type, record)
    if invalid is not None:
        raise InvalidEventError(INVALID_PREFIX + invalid)
    return writer, record


def decode(data: bytes, reg: SchemaRegistry | None = None) -> Event:
    """Decode one event into its dataclass (newest shape of its type)."""
    writer, record = decode_record(data, reg)
    cls = EVENT_TYPES.get(writer.event_type)
    if cls is None:
        raise EventDecodeError(f"no event class for type {writer.event_type!r}")
    return cls.from_record(record)
