"""Pure logic of the state tasks: hop paths, audit checksums, config digests."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from replicator.client.policy import DefaultReplicationPolicy, IdentityReplicationPolicy
from replicator.client.provenance import PROVENANCE_HEADER
from replicator.tasks.audit import WindowSum, add_hash, record_hash
from replicator.tasks.config_snapshots import snapshot_digest
from replicator.tasks.heartbeats import hop_path


def test_hop_path_from_topic_names_under_the_default_policy():
    policy = DefaultReplicationPolicy()
    assert hop_path(policy, "A.heartbeats", None, "B") == ("A", "B")
    assert hop_path(policy, "B.A.heartbeats", None, "C") == ("A", "B", "C")
    assert hop_path(policy, "heartbeats", None, "A") is None  # written here


def test_hop_path_from_the_provenance_header_under_identity():
    policy = IdentityReplicationPolicy()
    assert hop_path(policy, "heartbeats", [(PROVENANCE_HEADER, b"A,B")], "C") == ("A", "B", "C")
    assert hop_path(policy, "heartbeats", [("other", b"x")], "C") is None


records = st.lists(
    st.tuples(st.binary(max_size=20) | st.none(), st.binary(max_size=20) | st.none(), st.integers(0, 2**40)),
    max_size=30,
)


@given(records, st.randoms())
def test_the_window_checksum_ignores_order_and_the_provenance_header(recs, rnd):
    plain, stamped = WindowSum(), WindowSum()
    for i, (key, value, ts) in enumerate(recs):
        plain.add(i, record_hash(key, value, [("h", b"1")], ts))
    shuffled = list(enumerate(recs))
    rnd.shuffle(shuffled)
    for i, (key, value, ts) in shuffled:
        stamped.add(i, record_hash(key, value, [("h", b"1"), (PROVENANCE_HEADER, b"A")], ts))
    assert (plain.count, plain.checksum) == (stamped.count, stamped.checksum)


def test_the_checksum_sees_every_part_of_a_record():
    base = record_hash(b"k", b"v", [("h", b"1")], 5)
    changed = [
        record_hash(b"k2", b"v", [("h", b"1")], 5),
        record_hash(b"k", b"v2", [("h", b"1")], 5),
        record_hash(b"k", b"v", [("h", b"2")], 5),
        record_hash(b"k", b"v", [("h", b"1")], 6),
        record_hash(None, b"v", [("h", b"1")], 5),
        record_hash(b"", b"v", [("h", b"1")], 5),
    ]
    assert base not in changed and len(set(changed)) == len(changed)
    assert add_hash(2**64 - 1, 2) == 1  # sums wrap at 64 bits


def test_config_digest_changes_with_partitions_configs_and_acls_only():
    configs = {"retention.ms": "1", "cleanup.policy": "delete"}
    d = snapshot_digest(3, configs, ("u|*|READ|ALLOW|LITERAL|t",), True)
    assert d == snapshot_digest(3, dict(reversed(list(configs.items()))), ("u|*|READ|ALLOW|LITERAL|t",), True)
    assert d != snapshot_digest(4, configs, ("u|*|READ|ALLOW|LITERAL|t",), True)
    assert d != snapshot_digest(3, {**configs, "retention.ms": "2"}, ("u|*|READ|ALLOW|LITERAL|t",), True)
    assert d != snapshot_digest(3, configs, (), True)
    assert d != snapshot_digest(3, configs, ("u|*|READ|ALLOW|LITERAL|t",), False)
