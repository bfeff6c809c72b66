"""An increment decoded in worker processes equals the same rows decoded in one (``DecodePool``).

The rows hold every event type, an older schema version and every kind of bad record the Spark
decoder test uses (``tests/test_lakehouse_decode.py``), repeated so that each worker's slice starts
and ends in the middle of them; the slices must come back in bronze order, each type's rows in the
newest schema's columns, the rejected rows with the same reasons."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse.duck import silver_decode
from lakehouse.duck.arrow_types import silver_arrow_schema
from lakehouse.duck.silver_decode import DecodePool, decode_rows
from tests.test_lakehouse_decode import _records


def _bronze(bodies: list[bytes]) -> pa.Table:
    n = len(bodies)
    return pa.table(
        {
            "cluster": ["B"] * n,
            "topic": ["mirrorlake.events"] * n,
            "partition": pa.array([i % 3 for i in range(n)], pa.int32()),
            "offset": pa.array(range(n), pa.int64()),
            "value": pa.array(bodies, pa.binary()),
        }
    )


@pytest.fixture(scope="module")
def pool():
    with DecodePool(workers=2) as decoder:
        yield decoder


def test_workers_decode_what_one_process_does_in_bronze_order(pool, monkeypatch):
    bodies = [body for _ in range(7) for body in _records().values()]  # 7 rounds: slices split a round
    rows = _bronze(bodies)
    monkeypatch.setattr(silver_decode, "_FEWEST_FOR_WORKERS", 1)  # workers even for these few rows
    here, there = decode_rows(rows), pool.decode(rows)
    assert there.events.keys() == here.events.keys()
    for event_type, table in here.events.items():
        assert table.schema == silver_arrow_schema(event_type)
        assert there.events[event_type].equals(table), event_type
        offsets = table["state_offset"].to_pylist()
        assert offsets == sorted(offsets), f"{event_type}: not in bronze order"
    assert there.rejected == here.rejected
    assert {r["reason"] for r in here.rejected} >= {"not a mirrorlake event: bad header or unknown schema fingerprint"}
    decoded = sum(t.num_rows for t in here.events.values()) + len(here.rejected)
    assert decoded == rows.num_rows


def _same(left: silver_decode.Decoded, right: silver_decode.Decoded) -> bool:
    return (
        left.events.keys() == right.events.keys()
        and all(left.events[t].equals(right.events[t]) for t in left.events)
        and left.rejected == right.rejected
    )


def test_one_worker_or_few_rows_give_the_same_rows(pool):
    rows = _bronze(list(_records().values()))
    alone = DecodePool(workers=1)
    try:
        assert _same(alone.decode(rows), decode_rows(rows))
    finally:
        alone.close()
    assert _same(pool.decode(rows), decode_rows(rows))  # below the threshold: decoded here


_HOLDS_A_POOL = """
import os, sys, time
from lakehouse.duck.silver_decode import DecodePool
if __name__ == "__main__":
    pool = DecodePool(workers=2)
    pool.decode(__import__("pyarrow").table({"cluster": [], "topic": [], "partition": [], "offset": [], "value": []}))
    time.sleep(2)  # the workers are up (spawned at the pool's start)
    print(os.getpid(), flush=True)
    time.sleep(600)
"""


def test_the_workers_end_when_their_process_is_killed(tmp_path):
    """serve killed by SIGKILL must not leave its decoding processes behind (they hold both ends of
    their task pipe, so nothing else would end them)."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from tests.waiting import wait_for

    script = tmp_path / "holder.py"
    script.write_text(_HOLDS_A_POOL)
    root = str(Path(__file__).resolve().parents[1])
    holder = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": root}
    )
    try:
        assert holder.stdout is not None and int(holder.stdout.readline()) == holder.pid
        children = [
            int(p)
            for p in subprocess.run(["pgrep", "-P", str(holder.pid)], capture_output=True, text=True).stdout.split()
        ]
        assert len(children) >= 2  # the two workers (and multiprocessing's resource tracker)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    wait_for(lambda: not any(Path(f"/proc/{c}").exists() for c in children), "the decoding workers gone", 30)


_NO_MAIN_GUARD = """
import sys
from pathlib import Path
with open(sys.argv[1], "a") as runs:  # a script without a __main__ guard: each run leaves a line
    runs.write("ran\\n")
from lakehouse.duck import silver_decode
from lakehouse.duck.silver_decode import DecodePool, decode_rows
from tests.test_lakehouse_decode import _records
from tests.test_silver_decode import _bronze, _same
silver_decode._FEWEST_FOR_WORKERS = 1  # the workers decode even these few rows
rows = _bronze(list(_records().values()))
with DecodePool(workers=2) as pool:
    assert _same(pool.decode(rows), decode_rows(rows))
"""


def test_the_workers_never_run_the_callers_main(tmp_path):
    """Issue 60: a library user's script without a ``__main__`` guard (or a Streamlit AppTest, which
    points ``__main__`` at its script) ran again in every spawned worker, and the pool broke. The
    script below decodes through workers and runs once."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script, runs = tmp_path / "unguarded.py", tmp_path / "runs.txt"
    script.write_text(_NO_MAIN_GUARD)
    root = str(Path(__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, str(script), str(runs)], capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": root},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert runs.read_text() == "ran\n"
