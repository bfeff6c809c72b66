"""Offset translation after failover, mirrorlake vs a real MirrorMaker 2, against ground truth by content.

A small run of ``bench.translation_vs_mm2``: mirrorlake A->B and MM2 A->C copy the same topic;
groups committed all over it on A. mirrorlake's translation must lose and re-read nothing for
every group (every committed offset is replicated here), and MM2's checkpoints must re-read at
least as much. No timing is asserted.
"""

from __future__ import annotations

import pytest

from bench.failover import format_report
from bench.translation_vs_mm2 import run_comparison

pytestmark = pytest.mark.kafka


def test_mirrorlake_translation_is_exact_and_mm2_rereads_at_least_as_much(kafka_clusters, unique_topic, tmp_path):
    comparison = run_comparison(
        kafka_clusters.config(),
        work_dir=tmp_path,
        topic=unique_topic("translation").replace("-", "_"),
        records=3000,
        partitions=2,
        fractions=[0.01, 0.1, 0.37, 0.5, 0.83, 0.99, 1.0],
        transactions=4,
        records_per_transaction=20,
        mm2_timeout_s=120,
    )
    report = "\n".join(format_report(comparison))
    assert len(comparison.rows) == 14, report
    for row in comparison.rows:
        assert row.mirrorlake is not None and row.mirrorlake == row.exact, report
        assert row.mirrorlake_cost.lost == 0 and row.mirrorlake_cost.reread == 0, report
        assert row.mm2_cost.reread >= row.mirrorlake_cost.reread, report
        if row.mirrorlake_checkpoint_cost is not None:  # the replicator's own checkpoint events
            assert row.mirrorlake_checkpoint_cost == row.mirrorlake_cost, report
    assert sum(r.mm2_cost.reread for r in comparison.rows) >= sum(r.mirrorlake_cost.reread for r in comparison.rows)
