"""Provenance header: which clusters a record has been replicated from, in order.

Cycle prevention by topic name (the default policy) fails under the identity policy, where a
remote topic has the local topic's name. mirrorlake therefore can stamp every copied record with a
header ``mirrorlake.provenance`` = the aliases it was copied from (``A`` after A->B, ``A,B`` after
B->C). A flow never copies a record whose provenance already contains its target: a record never
returns to a cluster it came from, under any policy and any topology.
"""

from __future__ import annotations

__all__ = ["PROVENANCE_HEADER", "Provenance"]

PROVENANCE_HEADER = "mirrorlake.provenance"
_SEP = ","


class Provenance:
    """Per-flow header logic; ``stamp`` returns the headers to write, or None to skip the record."""

    __slots__ = ("_source", "_target", "_enabled")

    def __init__(self, source: str, target: str, *, enabled: bool) -> None:
        self._source = source
        self._target = target
        self._enabled = enabled

    @property
    def enabled(self) -> bool:
        return self._enabled

    def stamp(
        self, headers: list[tuple[str, bytes | None]] | None
    ) -> tuple[bool, list[tuple[str, bytes | None]] | None]:
        """(copy?, headers for the copy). Records are skipped only when they would close a cycle."""
        if not headers:
            if not self._enabled:
                return True, headers
            return True, [(PROVENANCE_HEADER, self._source.encode())]
        for i, (name, value) in enumerate(headers):
            if name == PROVENANCE_HEADER:
                path = (value or b"").decode().split(_SEP) if value else []
                if self._target in path:
                    return False, None
                if not self._enabled:
                    return True, headers
                out = list(headers)
                out[i] = (PROVENANCE_HEADER, _SEP.join([*path, self._source]).encode())
                return True, out
        if not self._enabled:
            return True, headers
        return True, [*headers, (PROVENANCE_HEADER, self._source.encode())]

    @staticmethod
    def hops(headers: list[tuple[str, bytes | None]] | None) -> list[str]:
        """The clusters a record was replicated from (oldest first); empty for a local record."""
        for name, value in headers or ():
            if name == PROVENANCE_HEADER and value:
                return value.decode().split(_SEP)
        return []
