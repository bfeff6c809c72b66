"""Start the Streamlit server for the dashboard, bound to 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from replicator.config import MirrorlakeConfig

__all__ = ["serve", "APP"]

APP = Path(__file__).with_name("app.py")


def serve(config_path: Path, config: MirrorlakeConfig, *, port: int = 8501) -> int:
    """Run Streamlit in the foreground until interrupted; returns its exit code."""
    command = [
        sys.executable, "-m", "streamlit", "run", str(APP),
        "--server.address", "127.0.0.1", "--server.port", str(port),
        "--server.headless", "true", "--browser.gatherUsageStats", "false",
        "--", "--config", str(config_path),
    ]  # fmt: skip
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 0
