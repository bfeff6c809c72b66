"""SIGTERM/SIGINT stop a long-running command gracefully, and surely (issue 33, item 3).

Real processes and real signals: a child enters ``mirrorlake.stopping.stopping_on_signals`` with a
stop that never finishes (a drain that hangs), and is signalled. The first signal must end it
within its grace (faulthandler's watchdog: every thread's stack, exit 1), a second at once (128 +
the signal), and a command that stops in time leaves no watchdog behind. The harness waits with a
safety timeout only; nothing here measures time.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

_CHILD = textwrap.dedent(
    """
    import sys, time, threading
    from mirrorlake.stopping import stopping_on_signals
    stopped = threading.Event()
    hang = sys.argv[2] == "hang"
    with stopping_on_signals(lambda: None if hang else stopped.set(), grace_s=float(sys.argv[1]), what="child"):
        print("ready", flush=True)
        while not stopped.wait(0.05):
            pass
    print("stopped in time", flush=True)
    time.sleep(float(sys.argv[1]) + 1)  # the watchdog must be off now: a normal exit follows
    """
)


def _child(grace_s: float, mode: str) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(grace_s), mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    return child


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_that_hangs_ends_with_every_stack_after_its_grace(sig: signal.Signals):
    child = _child(1.0, "hang")
    child.send_signal(sig)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 1, (out, err)
    assert "Timeout (0:00:01)!" in err and "Thread" in err, err  # faulthandler's stacks say where it hung


def test_a_second_signal_ends_the_process_at_once():
    child = _child(3600.0, "hang")
    child.send_signal(signal.SIGTERM)
    assert child.stderr is not None and "SIGTERM received, stopping" in child.stderr.readline()
    child.send_signal(signal.SIGTERM)
    _out, err = child.communicate(timeout=120)
    assert child.returncode == 128 + signal.SIGTERM and "second SIGTERM" in err, err


def test_a_command_that_stops_in_time_exits_normally_and_calls_the_watchdog_off():
    child = _child(1.0, "graceful")
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=120)
    assert (child.returncode, out) == (0, "stopped in time\n"), err
    assert "Timeout" not in err
