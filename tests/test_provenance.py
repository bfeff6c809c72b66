"""Provenance header logic (pure)."""

from replicator.client.provenance import PROVENANCE_HEADER, Provenance
from replicator.config import parse_config
from replicator.config.topology import find_cycle


def test_stamp_appends_the_source_and_keeps_other_headers():
    p = Provenance("B", "C", enabled=True)
    ok, headers = p.stamp([("app", b"1"), (PROVENANCE_HEADER, b"A")])
    assert ok and headers == [("app", b"1"), (PROVENANCE_HEADER, b"A,B")]
    ok, headers = p.stamp(None)
    assert ok and headers == [(PROVENANCE_HEADER, b"B")]


def test_a_record_never_returns_to_a_cluster_it_came_from():
    assert Provenance("B", "A", enabled=True).stamp([(PROVENANCE_HEADER, b"A")]) == (False, None)
    assert Provenance("C", "A", enabled=False).stamp([(PROVENANCE_HEADER, b"A,B")]) == (False, None)


def test_disabled_leaves_headers_untouched():
    headers = [("app", b"1")]
    assert Provenance("A", "B", enabled=False).stamp(headers) == (True, headers)


def test_find_cycle():
    def cfg(*pairs):
        clusters = {c: {"bootstrap_servers": "x:1"} for c in "ABCK"}
        return parse_config({"clusters": clusters, "flows": [{"source": p[0], "target": p[-1]} for p in pairs]}).flows

    assert find_cycle(cfg("A->B", "B->C")) is None
    assert find_cycle(cfg("A->K", "B->K", "K->C")) is None
    assert find_cycle(cfg("A->B", "B->A")) == ["A", "B", "A"]
    assert find_cycle(cfg("A->B", "B->C", "C->A")) == ["A", "B", "C", "A"]
