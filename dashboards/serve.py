"""Start the Streamlit server for the dashboard, bound to 127.0.0.1, for viewers not developers.

``client.toolbarMode=viewer`` hides the developer menu (rerun, clear cache, Deploy);
``client.showErrorDetails=none`` keeps tracebacks in the server log (pages show user errors as
messages themselves); no file watcher, no usage statistics, no browser opened.

``serve`` replaces the ``mirrorlake dashboard`` process with Streamlit's (``exec``), so the PID a
supervisor (systemd, a script, a test) holds is the server's: its SIGTERM stops the server. As a
child process, the server outlived a SIGTERM to its parent and kept the port.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn

from replicator.config import MirrorlakeConfig

__all__ = ["serve", "command", "APP"]

APP = Path(__file__).with_name("app.py")


def command(config_path: Path, *, port: int = 8501, address: str = "127.0.0.1") -> list[str]:
    """The ``streamlit run`` command line (tests start it the same way)."""
    return [
        sys.executable, "-m", "streamlit", "run", str(APP),
        "--server.address", address, "--server.port", str(port),
        "--server.headless", "true", "--server.fileWatcherType", "none", "--server.runOnSave", "false",
        "--browser.gatherUsageStats", "false",
        "--client.toolbarMode", "viewer", "--client.showErrorDetails", "none",
        "--theme.base", "light",
        "--", "--config", str(config_path),
    ]  # fmt: skip


def serve(config_path: Path, config: MirrorlakeConfig, *, port: int = 8501, address: str = "127.0.0.1") -> NoReturn:
    """Become the Streamlit server (same PID) until it is stopped (SIGTERM, Ctrl-C); never returns."""
    args = command(config_path, port=port, address=address)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(args[0], args)
