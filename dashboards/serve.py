"""Start the Streamlit server for the dashboard, bound to 127.0.0.1, for viewers not developers.

``client.toolbarMode=viewer`` hides the developer menu (rerun, clear cache, Deploy);
``client.showErrorDetails=none`` keeps tracebacks in the server log (pages show user errors as
messages themselves); no file watcher, no usage statistics, no browser opened.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def serve(config_path: Path, config: MirrorlakeConfig, *, port: int = 8501) -> int:
    """Run Streamlit in the foreground until interrupted; returns its exit code."""
    try:
        return subprocess.call(command(config_path, port=port))
    except KeyboardInterrupt:
        return 0
