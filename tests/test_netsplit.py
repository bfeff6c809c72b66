"""The chaos soak's network partition (``bench/netsplit.py``): one process cut off from one port, no one else.

A listener on 127.0.0.1 stands for a broker; a child process under the run's group connects with
a short timeout. Needs root and iptables (the CI machine and ``scripts/bootstrap.sh`` have both):
elsewhere the test fails naming what is missing rather than passing unseen.
"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from bench import netsplit

_TAG = "mirrorlake-netsplit-test"

_CONNECT = """
import socket, sys
s = socket.socket()
s.settimeout(2)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
    print("connected")
except OSError as exc:
    print(f"cut off: {exc}")
"""


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


def _connect(port: int, gid: int | None) -> str:
    prefix = netsplit.as_group(gid) if gid is not None else []
    done = subprocess.run(
        [*prefix, sys.executable, "-c", _CONNECT, str(port)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_partition_cuts_off_only_its_group_and_only_while_it_lasts(listener):
    assert netsplit.unavailable() is None, netsplit.unavailable()
    gid = netsplit.GID_BASE + 7
    with netsplit.partitioned(gid, listener, _TAG):
        assert _connect(listener, gid).startswith("cut off")
        assert _connect(listener, netsplit.GID_BASE + 8) == "connected"  # another process of the run
        assert _connect(listener, None) == "connected"  # every other client
    assert _connect(listener, gid) == "connected"


def test_clear_removes_the_rules_a_killed_run_left(listener):
    assert netsplit.unavailable() is None, netsplit.unavailable()
    gid = netsplit.GID_BASE + 9
    stale = netsplit.partitioned(gid, listener, _TAG)
    stale.__enter__()  # a run killed inside its block never leaves it
    assert _connect(listener, gid).startswith("cut off")
    assert netsplit.clear(_TAG) == 1
    assert _connect(listener, gid) == "connected"
    assert netsplit.clear(_TAG) == 0
