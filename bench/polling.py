"""One GET for pollers that race a server's start or exit (status pages, start-up checks).

A poller asks again a moment later, so "nothing answered whole" is an answer, not an error: the
server is not listening yet (``OSError``), or it exited mid-reply (``http.client.HTTPException``,
e.g. ``IncompleteRead``, which is not an ``OSError``).
"""

from __future__ import annotations

import http.client
import urllib.error
import urllib.request

_NO_WHOLE_ANSWER = (OSError, http.client.HTTPException)


def get_whole(url: str, timeout_s: float = 2.0) -> tuple[int, bytes] | None:
    """``(status, body)`` of a GET, an HTTP error status included; ``None`` when nothing answered whole."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:  # a status like 503 still has a body worth reading
        try:
            return exc.code, exc.read()
        except _NO_WHOLE_ANSWER:
            return None
    except _NO_WHOLE_ANSWER:
        return None
