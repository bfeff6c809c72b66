"""The lakehouse's writer lease (``lakehouse.lease``): one build, serve or maintain at a time, on a
local directory (flock) and on S3 (a conditional put on moto's real S3 API server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ingest.paths import LakehousePaths
from lakehouse.lease import LakehouseBusyError, writer_lease
from replicator.config.model import LakehouseConfig
from tests.s3_support import S3Server


def _s3_root(server: S3Server, bucket: str) -> Path:
    return LakehousePaths.of(LakehouseConfig.model_validate(server.lakehouse(f"s3://{bucket}/lake"))).root


@pytest.fixture(params=["local", "s3"])
def root(request, tmp_path: Path) -> Path:
    if request.param == "local":
        return tmp_path / "lake"
    server = request.getfixturevalue("s3_server")
    return _s3_root(server, request.getfixturevalue("s3_bucket"))


def test_a_second_writer_waits_for_the_first_then_fails_naming_it(root: Path):
    with (
        writer_lease(root, "lakehouse build"),
        pytest.raises(LakehouseBusyError) as err,
        writer_lease(root, "lakehouse maintain", wait_s=2),
    ):
        pass
    said = str(err.value)
    assert "`lakehouse build`" in said and f"pid {os.getpid()}" in said and "is writing this lakehouse" in said
    assert "waited 2 s" in said
    with writer_lease(root, "lakehouse maintain", wait_s=0):  # released: free at once
        pass


def test_a_waiting_writer_gets_the_lease_when_the_holder_lets_go(root: Path):
    order: list[str] = []
    held = threading.Event()

    def first() -> None:
        with writer_lease(root, "lakehouse build"):
            held.set()
            time.sleep(2)
            order.append("first done")

    t = threading.Thread(target=first)
    t.start()
    held.wait(30)
    with writer_lease(root, "lakehouse serve", wait_s=30):
        order.append("second in")
    t.join()
    assert order == ["first done", "second in"]


_HOLD_AND_DIE = (
    "import os, sys\n"
    "from tests.s3_support import S3Server\n"
    "from tests.test_writer_lease import _s3_root\n"
    "from lakehouse.lease import writer_lease\n"
    "with writer_lease(_s3_root(S3Server(*sys.argv[1:4]), sys.argv[4]), 'lakehouse build'):\n"
    "    os._exit(0)  # as a SIGKILL would: the lease is never released\n"
)


def test_on_s3_the_lease_of_a_process_that_died_is_taken_over_at_once(s3_server: S3Server, s3_bucket: str):
    # a process of its own (not multiprocessing: a spawned child re-runs the worker's __main__,
    # which an earlier Streamlit AppTest in the same xdist worker replaced)
    args = [sys.executable, "-c", _HOLD_AND_DIE, s3_server.endpoint, s3_server.key_id, s3_server.secret, s3_bucket]
    died = subprocess.run(args, cwd=Path(__file__).parent.parent, capture_output=True, text=True, timeout=120)
    assert died.returncode == 0, died.stderr
    assert s3_server.keys(s3_bucket, "lake/leases/") == ["lake/leases/writer.json"]  # left behind
    # no wait and an hour to live: only the dead holder's pid lets it be taken over
    with writer_lease(_s3_root(s3_server, s3_bucket), "lakehouse build", wait_s=0, ttl_s=3600):
        lease = json.loads(
            s3_server.client().get_object(Bucket=s3_bucket, Key="lake/leases/writer.json")["Body"].read()
        )
        assert lease["pid"] == os.getpid()
    assert s3_server.keys(s3_bucket, "lake/leases/") == []  # released


def test_on_s3_a_lease_past_its_time_to_live_is_taken_over_and_its_holder_told(s3_server: S3Server, s3_bucket: str):
    root = _s3_root(s3_server, s3_bucket)
    taken = "took the lease over; it is held by `lakehouse build`"
    stalled = writer_lease(root, "lakehouse serve", ttl_s=1, renew_s=3600)  # a holder that never renews
    with pytest.raises(LakehouseBusyError, match="took the lease over"), stalled as still_held:  # noqa: PT012
        still_held()  # held: no error
        time.sleep(2.5)  # S3's times have whole seconds: surely past 1 s
        with writer_lease(root, "lakehouse build", wait_s=0, ttl_s=1), pytest.raises(LakehouseBusyError, match=taken):
            still_held()  # what serve asks before each refresh
        # and the block's end says it too (a build learns there)
    assert s3_server.keys(s3_bucket, "lake/leases/") == []  # the taker released it; the stalled one left it


def test_two_processes_asking_at_once_get_it_one_after_the_other(s3_server: S3Server, s3_bucket: str, tmp_path: Path):
    """Each holder appends ``in`` and ``out`` to one file while it holds the lease: the file's order
    is the order things happened, no clock involved."""
    trail = tmp_path / "trail"
    script = (
        "import sys, os, time\n"
        "from tests.s3_support import S3Server\n"
        "from tests.test_writer_lease import _s3_root\n"
        "from lakehouse.lease import writer_lease\n"
        "root = _s3_root(S3Server(*sys.argv[1:4]), sys.argv[4])\n"
        "def say(word):\n"
        "    with open(sys.argv[5], 'a') as f:\n"
        "        f.write(f'{os.getpid()} {word}\\n')\n"
        "with writer_lease(root, 'lakehouse build', wait_s=60):\n"
        "    say('in')\n"
        "    time.sleep(1.5)  # long enough for the others to be asking meanwhile\n"
        "    say('out')\n"
    )
    args = [sys.executable, "-c", script, s3_server.endpoint, s3_server.key_id, s3_server.secret, s3_bucket, str(trail)]
    procs = [
        subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parent.parent) for _ in range(3)
    ]
    for p in procs:
        p.communicate(timeout=120)
        assert p.returncode == 0
    lines = [line.split() for line in trail.read_text().splitlines()]
    assert len(lines) == 6
    for (pid_in, word_in), (pid_out, word_out) in zip(lines[::2], lines[1::2], strict=True):
        assert (word_in, word_out) == ("in", "out") and pid_in == pid_out  # never two inside at once
