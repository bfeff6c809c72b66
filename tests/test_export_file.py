"""Files of record contents are private and never overwritten unasked (issue 33, item 9).

``failback plan --export`` overwrote an existing file silently, wrote it 0644 and took ``-`` for a
file name. ``replicator.failover.export.export_file`` on a real file system: 0600, refused over an
existing file without ``force`` (which replaces it whole, or not at all), ``-`` is standard output,
and every failure one ``FailoverError`` naming the path (exit 21 from the CLI).
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from replicator.errors import FailoverError
from replicator.failover.export import export_file


def test_a_new_export_is_private(tmp_path: Path):
    path = tmp_path / "never.jsonl"
    with export_file(path) as out:
        out.write("{}\n")
    assert path.read_text() == "{}\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_an_existing_file_is_kept_unless_forced_and_then_replaced_whole(tmp_path: Path):
    path = tmp_path / "never.jsonl"
    path.write_text("old\n")
    with pytest.raises(FailoverError, match="exists: pass --force"), export_file(path) as out:
        out.write("new\n")
    assert path.read_text() == "old\n"
    with pytest.raises(RuntimeError), export_file(path, force=True) as out:  # a failure mid-way
        out.write("half")
        raise RuntimeError("the source went away")
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["never.jsonl"]
    with export_file(path, force=True) as out:
        out.write("new\n")
    assert path.read_text() == "new\n" and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_dash_is_standard_output(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with export_file("-") as out:
        out.write("a record\n")
    assert capsys.readouterr().out == "a record\n" and not (tmp_path / "-").exists()


@pytest.mark.parametrize(
    ("where", "why"),
    [
        (lambda d: d / "no-such-dir" / "x.jsonl", "No such file or directory"),
        (lambda d: Path(""), "needs a file name"),
        (lambda d: Path("/dev/full"), "No space left on device"),
        (lambda d: d, "Is a directory"),
    ],
    ids=["missing-directory", "empty", "full-device", "a-directory"],
)
def test_a_path_that_cannot_take_it_is_one_named_error(where, why: str, tmp_path: Path):
    path = where(tmp_path)
    with pytest.raises(FailoverError, match=why), export_file(path, force=True) as out:
        out.write("x" * 100_000)
        out.flush()
