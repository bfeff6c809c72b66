"""`mirrorlake dashboard` is the server: a SIGTERM to the PID that started it stops it and frees its port.

Real processes (the CLI, Streamlit), no Kafka or Spark: the server answers its health endpoint on
127.0.0.1, then the test signals the PID it launched, as systemd or a script would, and checks that
nothing is left listening. Before ``serve`` exec'd Streamlit, the server was a child that outlived
that signal.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import yaml

from tests.dashboard_support import free_port, healthy
from tests.waiting import wait_for


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_sigterm_to_the_dashboard_pid_stops_the_server(tmp_path: Path) -> None:
    config = tmp_path / "conf.yaml"
    config.write_text(
        yaml.safe_dump(
            {"clusters": {"A": {"bootstrap_servers": "127.0.0.1:1"}}, "lakehouse": {"path": str(tmp_path / "lake")}}
        )
    )
    port = free_port()
    log = (tmp_path / "dashboard.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mirrorlake.cli", "dashboard", "-c", str(config), "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(
            lambda: healthy(f"http://127.0.0.1:{port}") or proc.poll() is not None,
            "the dashboard to answer",
            timeout_s=60,
        )
        assert proc.poll() is None, (tmp_path / "dashboard.log").read_text()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        assert code in (0, -signal.SIGTERM), (tmp_path / "dashboard.log").read_text()
        assert not _listening(port), f"port {port} still answers after SIGTERM to pid {proc.pid}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
