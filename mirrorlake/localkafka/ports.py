"""Free port pairs on 127.0.0.1 for local brokers (client port p, controller port p+1)."""

from __future__ import annotations

import errno
import random
import socket

__all__ = ["find_free_port_pair", "port_free", "PORT_RANGE"]

PORT_RANGE = (20000, 32000)  # below Linux's ephemeral range, so client sockets do not grab them


def port_free(port: int) -> bool:
    """True if nothing listens on (or holds) 127.0.0.1:port; TIME_WAIT leftovers do not count.
    Raises ``OSError`` for any other reason a bind fails (a privileged port, say)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def _port_pair_free(port: int) -> bool:
    try:
        return port_free(port) and port_free(port + 1)
    except OSError:
        return False


def find_free_port_pair(exclude: set[int] | None = None) -> int:
    """A port p such that p and p+1 are free on 127.0.0.1 (and neither is in ``exclude``)."""
    taken = exclude or set()
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(*PORT_RANGE)
        if not {port, port + 1} & taken and _port_pair_free(port):
            return port
    raise RuntimeError(f"no free port pair found in {PORT_RANGE} after 200 tries")
