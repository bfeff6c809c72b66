"""/metrics and /health cannot be held by slow clients (issue 33, item 10).

250 connections that sent half a request each held 250 threads. Real sockets against a real
``StatusServer``: no more than ``MAX_CONNECTIONS`` handler threads at once, the rest closed at once,
every silent client disconnected after ``READ_TIMEOUT_S``, and the endpoint answering afterwards.
The harness waits with safety timeouts only.
"""

from __future__ import annotations

import http.client
import socket
import threading

from prometheus_client import CollectorRegistry

from replicator.metrics.observability import MAX_CONNECTIONS, READ_TIMEOUT_S, StatusServer


def _handler_threads() -> int:
    return sum(1 for t in threading.enumerate() if "process_request_thread" in t.name)


def test_half_sent_requests_hold_neither_threads_nor_the_endpoint():
    server = StatusServer(CollectorRegistry(), lambda: {"status": "ok"}, host="127.0.0.1", port=0)
    slow: list[socket.socket] = []
    try:
        most = 0
        for _ in range(4 * MAX_CONNECTIONS):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            s.sendall(b"GET /hea")  # half a request line, then nothing
            slow.append(s)
            most = max(most, _handler_threads())
        for s in slow:  # every one ends: closed at once (no slot), or after READ_TIMEOUT_S of silence
            s.settimeout(READ_TIMEOUT_S * 6)
            try:
                while s.recv(1024):
                    most = max(most, _handler_threads())
            except ConnectionResetError:
                pass
        assert most <= MAX_CONNECTIONS
        assert server._server.refused > 0  # the bound was reached: those had no thread at all
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("GET", "/health")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        for s in slow:
            s.close()
        server.close()
