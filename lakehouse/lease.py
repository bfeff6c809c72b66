"""One writer per lakehouse at a time: the lease ``lakehouse build``, ``serve`` and ``maintain`` hold.

Why: on S3, Spark's Delta commits go through ``S3SingleDriverLogStore``. Hadoop's S3A has no
put-if-absent, so two drivers committing version N of one table at once would both "succeed" and
one commit would be lost (delta-rs, with S3's conditional put, would refuse the second). Locally,
Delta's rename-based commits are safe, but two builds at once still race on the gold build state
and fail each other's MERGEs. So writers take turns; readers (``mirrorlake sql``, the dashboard)
never take the lease.

- Local: ``flock`` on ``<root>/leases/writer.lock``; the kernel frees it when the holder dies.
- S3: the object ``<root>/leases/writer.json``, created with ``If-None-Match: *`` (S3's conditional
  put: exactly one creator wins), renewed by its holder every ``renew_s`` with ``If-Match`` on its
  ETag, and taken over, also with ``If-Match``, once it is older than ``ttl_s`` or its holder is a
  process of this host that no longer runs (a SIGKILLed build does not block the next for
  ``ttl_s``). A holder that loses its lease (stalled past ``ttl_s``) logs it at ERROR; the check
  the block is given (``serve`` calls it before each refresh) and the block's end raise
  ``LakehouseBusyError``.

A writer that finds the lease held waits up to ``wait_s``, then fails naming the holder.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from ingest.storage import describe_store_error, s3_access
from replicator.errors import ExitCode, MirrorlakeError

__all__ = ["LakehouseBusyError", "Holder", "writer_lease"]

_log = logging.getLogger(__name__)
_POLL_S = 1.0


class LakehouseBusyError(MirrorlakeError):
    """Another process holds the lakehouse's writer lease (or took it over from this one)."""

    exit_code = ExitCode.LAKEHOUSE_BUSY


@dataclass(frozen=True)
class Holder:
    """Who holds the lease, as written in it."""

    command: str
    host: str
    pid: int
    since_ms: int

    def describe(self) -> str:
        since = datetime.fromtimestamp(self.since_ms / 1000, tz=UTC).isoformat(timespec="seconds")
        return f"`{self.command}` (pid {self.pid} on {self.host}, since {since})"

    def gone(self) -> bool:
        """Whether the holder is a process of this host that no longer runs."""
        if self.host != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


@contextlib.contextmanager
def writer_lease(
    root: Path, command: str, *, wait_s: float = 60.0, ttl_s: float = 300.0, renew_s: float = 30.0
) -> Iterator[Callable[[], None]]:
    """Hold ``root``'s writer lease for the block (see the module), which gets a check to call
    between commits. ``LakehouseBusyError`` when another writer keeps it past ``wait_s``, or when
    this one lost it meanwhile."""
    me = Holder(command, socket.gethostname(), os.getpid(), int(time.time() * 1000))
    if s3_access(root) is None:
        with _local_lease(root, me, wait_s):
            yield lambda: None  # a flock is held until released or the process ends
        return
    lease = _S3Lease(root / "leases" / "writer.json", me, ttl_s)
    lease.acquire(wait_s)
    stop = threading.Event()
    renewer = threading.Thread(target=lease.renew_until, args=(stop, renew_s), name="lease-renewer", daemon=True)
    renewer.start()
    try:
        yield lease.check
        lease.check()
    finally:
        stop.set()
        renewer.join()
        lease.release()


def _busy(root: Path, holder: Holder | None, wait_s: float) -> LakehouseBusyError:
    who = holder.describe() if holder else "another process"
    return LakehouseBusyError(
        f"{root}: {who} is writing this lakehouse (waited {wait_s:.0f} s); one build, serve or maintain at a "
        "time: wait for it to finish, or stop it"
    )


@contextlib.contextmanager
def _local_lease(root: Path, me: Holder, wait_s: float) -> Iterator[None]:
    folder = root / "leases"
    folder.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    with open(folder / "writer.lock", "a+") as lock:
        while not _try_flock(lock):
            if time.monotonic() >= deadline:
                raise _busy(root, _read_holder((folder / "writer.json").read_text()), wait_s)
            time.sleep(_POLL_S)
        (folder / "writer.json").write_text(json.dumps(asdict(me)))
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _try_flock(lock: IO[str]) -> bool:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _read_holder(text: str) -> Holder | None:
    try:
        data = json.loads(text)
        return Holder(str(data["command"]), str(data["host"]), int(data["pid"]), int(data["since_ms"]))
    except (ValueError, KeyError, TypeError):
        return None


class _S3Lease:
    """The lease object and its ETag while held (see the module)."""

    def __init__(self, path: Path, me: Holder, ttl_s: float) -> None:
        self._path = path
        self._fs: Any = path.fs  # type: ignore[attr-defined]  # UPath's s3fs
        self._key = path.path  # type: ignore[attr-defined]
        self._me = me
        self._ttl_s = ttl_s
        self._etag: str | None = None
        self._lost: str | None = None

    def _body(self) -> bytes:
        return json.dumps(asdict(self._me)).encode()

    def acquire(self, wait_s: float) -> None:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self._etag = self._put(mode="create")
                return
            except FileExistsError:
                pass
            except OSError as exc:
                raise LakehouseBusyError(describe_store_error(str(self._path), exc)) from None
            held = self._current()
            if held is not None:
                holder, etag, age_s = held
                if holder is None or age_s > self._ttl_s or holder.gone():
                    why = "its holder is gone" if holder is not None and holder.gone() else f"{age_s:.0f} s old"
                    try:
                        self._etag = self._put(IfMatch=etag)
                    except OSError:  # another writer took it over first
                        pass
                    else:
                        _log.warning("took over the lakehouse writer lease from %s (%s)", _who(holder), why)
                        return
                if time.monotonic() >= deadline:
                    raise _busy(self._path.parent.parent, holder, wait_s)
            time.sleep(_POLL_S)

    def _put(self, **conditions: str) -> str:
        try:
            reply = self._fs.pipe_file(self._key, self._body(), **conditions)
        except (FileExistsError, OSError):
            raise
        except Exception as exc:  # noqa: BLE001 - botocore's errors: the store itself is the problem
            raise LakehouseBusyError(describe_store_error(str(self._path), exc)) from None
        return str(reply["ETag"])

    def _current(self) -> tuple[Holder | None, str, float] | None:
        """(holder, ETag, seconds since the store last wrote it) or None when it is gone."""
        try:
            info = self._fs.info(self._key, refresh=True)
            text = self._fs.cat_file(self._key).decode(errors="replace")
        except FileNotFoundError:
            return None
        modified = info.get("LastModified")
        age_s = time.time() - modified.timestamp() if isinstance(modified, datetime) else 0.0
        return _read_holder(text), str(info["ETag"]), age_s

    def renew_until(self, stop: threading.Event, every_s: float) -> None:
        while not stop.wait(every_s):
            try:
                self._etag = self._put(IfMatch=self._etag or "")
            except OSError:
                self._lost = "another writer took the lease over (this process did not renew it in its time to live)"
                _log.error("lost the lakehouse writer lease: %s", self._lost)
                return
            except LakehouseBusyError as exc:  # the store did not answer: try again next round
                _log.warning("could not renew the lakehouse writer lease: %s", exc)

    def check(self) -> None:
        """Raise if the lease is no longer this process's (a renewal failed, or its ETag changed)."""
        if self._lost is None:
            held = self._current()
            if held is None or held[1] != self._etag:
                taker = _who(held[0]) if held is not None else "nobody (it was deleted)"
                self._lost = f"another writer took the lease over; it is held by {taker}"
        if self._lost is not None:
            raise LakehouseBusyError(f"{self._path}: {self._lost}")

    def release(self) -> None:
        """Delete the lease if it is still ours (a taken-over lease is the new holder's)."""
        held = self._current()
        if held is None or held[1] != self._etag:
            return
        try:
            self._fs.rm_file(self._key)
        except Exception as exc:  # noqa: BLE001 - expires after ttl_s anyway
            _log.warning("could not release the lakehouse writer lease: %s", exc)


def _who(holder: Holder | None) -> str:
    return holder.describe() if holder else "an unreadable lease"
