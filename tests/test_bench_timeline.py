"""bench/test_timeline.py: per-worker timelines read back into module spans and idle times."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.test_timeline import read_spans, report


def test_spans_are_paired_per_worker_and_summed_per_module(tmp_path: Path) -> None:
    (tmp_path / "gw0.tsv").write_text(
        "start\t100.00\ttests/test_a.py::one\nend\t110.00\ttests/test_a.py::one\n"
        "start\t110.00\ttests/test_a.py::two\nend\t130.00\ttests/test_a.py::two\n"
        "start\t130.00\ttests/test_b.py::cut\n"  # never finished (a killed run): left out
    )
    (tmp_path / "gw1.tsv").write_text("start\t101.00\ttests/test_c.py::x\nend\t201.00\ttests/test_c.py::x\n")
    spans = read_spans(tmp_path)
    assert [(s.worker, s.nodeid) for s in spans] == [
        ("gw0", "tests/test_a.py::one"),
        ("gw1", "tests/test_c.py::x"),
        ("gw0", "tests/test_a.py::two"),
    ]
    lines = report(spans)
    assert lines[0].split() == ["gw0", "0", "30", "30", "tests/test_a.py"]
    assert lines[1].split() == ["gw1", "1", "101", "100", "tests/test_c.py"]
    assert lines[2:] == ["gw0 idle from 30 s, busy 30 s", "gw1 idle from 101 s, busy 100 s"]


def test_an_empty_timeline_is_an_error_naming_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="-p bench.test_timeline"):
        report(read_spans(tmp_path))
