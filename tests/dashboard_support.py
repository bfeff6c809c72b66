"""What the dashboard's process tests share: a free port for ``mirrorlake dashboard``, and its health check."""

from __future__ import annotations

import socket

from bench.polling import get_whole

__all__ = ["free_port", "healthy"]


def free_port() -> int:
    """A port on 127.0.0.1 free at the time of asking."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def healthy(url: str) -> bool:
    """Whether the Streamlit server at ``url`` answers its health endpoint with 200."""
    reply = get_whole(f"{url}/_stcore/health")
    return reply is not None and reply[0] == 200
