"""Files of record contents that failback writes for the user: private, and never overwritten unasked.

``failback plan --export FILE`` writes the never-replicated records, keys and values included, as
JSON lines. They are the user's data, so the file is created ``0600``; an existing regular file is
refused unless ``force`` (then it is replaced atomically: the old file stays whole until the new
one is complete); ``-`` is standard output; a device or a pipe (``/dev/stdout``, a fifo) is
written as it is. Every failure (a missing directory, a full disk, no permission) is one
``FailoverError`` naming the path.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from replicator.errors import FailoverError

__all__ = ["export_file", "STDOUT"]

STDOUT = "-"


@contextmanager
def export_file(path: Path | str, *, force: bool = False) -> Iterator[TextIO]:
    """A text file to write ``path``'s new contents into, committed when the block ends without error."""
    if str(path) == STDOUT:
        yield sys.stdout
        return
    path = Path(path)
    if str(path) in ("", "."):
        raise FailoverError("--export needs a file name (or - for standard output)")
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise FailoverError(f"--export {path}: {exc.strerror}") from None
    try:
        if mode is not None and not stat.S_ISREG(mode):  # a device or a pipe: written as it is
            with path.open("w", encoding="utf-8") as out:
                yield out
            return
        if mode is not None and not force:
            raise FailoverError(f"--export {path} exists: pass --force to replace it")
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent or ".")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:  # mkstemp makes it 0600
                yield out
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise FailoverError(f"--export {path}: {exc.strerror or exc}") from None
