"""Where the test suite's wall time goes: each test's start and end, per xdist worker.

As a pytest plugin it appends one line per test start and end to ``$TEST_TIMELINE_DIR/<worker>.tsv``
(default ``.mirrorlake/test-timeline``; setup and teardown included, so a module's fixtures count in
its first and last test). As a script it prints, per worker, each module's first start, last end and
summed test time, and when each worker went idle: the numbers behind docs/testing.md.

    PYTHONPATH=. .venv/bin/pytest -n 3 --dist loadgroup -p bench.test_timeline
    .venv/bin/python -m bench.test_timeline .mirrorlake/test-timeline
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

DIR_ENV = "TEST_TIMELINE_DIR"
_DEFAULT_DIR = ".mirrorlake/test-timeline"


def _record(kind: str, nodeid: str) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:  # the xdist controller sees every report again: the workers' lines suffice
        return
    out = Path(os.environ.get(DIR_ENV, _DEFAULT_DIR))
    out.mkdir(parents=True, exist_ok=True)
    with (out / f"{worker}.tsv").open("a") as f:
        f.write(f"{kind}\t{time.time():.2f}\t{nodeid}\n")


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    _record("start", nodeid)


def pytest_runtest_logfinish(nodeid: str, location: object) -> None:
    _record("end", nodeid)


@dataclass(frozen=True)
class Span:
    worker: str
    start: float
    end: float
    nodeid: str


def read_spans(directory: Path) -> list[Span]:
    """Every finished test of every worker's file in ``directory``, in start order."""
    spans = []
    for path in sorted(directory.glob("*.tsv")):
        started: dict[str, float] = {}
        for line in path.read_text().splitlines():
            kind, at, nodeid = line.split("\t")
            if kind == "start":
                started[nodeid] = float(at)
            elif nodeid in started:
                spans.append(Span(path.stem, started.pop(nodeid), float(at), nodeid))
    return sorted(spans, key=lambda s: s.start)


def report(spans: Iterable[Span]) -> list[str]:
    """Per worker and module: first start, last end, summed test time; then when each worker went idle."""
    spans = list(spans)
    if not spans:
        raise SystemExit("no finished tests recorded: run pytest with -p bench.test_timeline first")
    t0 = min(s.start for s in spans)
    modules: dict[tuple[str, str], tuple[float, float, float]] = {}  # first start, last end, summed time
    for s in spans:
        key = (s.worker, s.nodeid.split("::")[0])
        first, last, summed = modules.get(key, (s.start, s.end, 0.0))
        modules[key] = (first, max(last, s.end), summed + s.end - s.start)
    lines = [f"{w}\t{a - t0:7.0f}\t{b - t0:7.0f}\t{d:6.0f}\t{m}" for (w, m), (a, b, d) in modules.items()]
    for worker in sorted({s.worker for s in spans}):
        own = [s for s in spans if s.worker == worker]
        busy = sum(s.end - s.start for s in own)
        lines.append(f"{worker} idle from {max(s.end for s in own) - t0:.0f} s, busy {busy:.0f} s")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, nargs="?", default=Path(_DEFAULT_DIR))
    args = parser.parse_args()
    print("worker\tfirst\tlast\tsum_s\tmodule")
    print("\n".join(report(read_spans(args.directory))))


if __name__ == "__main__":
    main()
