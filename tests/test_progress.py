"""Progress display decisions: drawn with rich only on a terminal, plain log lines otherwise."""

from __future__ import annotations

import io
import logging

import pytest

from mirrorlake.progress import Steps, interactive


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_drawn_only_on_a_terminal():
    assert interactive(_Terminal())
    assert not interactive(io.StringIO())
    with open("/dev/null") as closed:
        pass
    assert not interactive(closed)  # a closed stream raises ValueError: not a terminal
    assert not interactive()  # pytest captures stderr: not a terminal, as in CI
    assert Steps().rich is False


def test_without_a_terminal_steps_and_counts_are_log_lines(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger="mirrorlake")
    with Steps() as steps:
        with steps.step("produce"):
            pass
        steps.stage("gold offset_mapping")
        steps.counts("A->B records", 10, 90)
        steps.counts("A->B records", 50, 50)  # within PLAIN_EVERY_S of the last line: not logged
        steps.counts("A->B records", 100, 0)  # done: always logged
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "produce ..." and lines[1].startswith("produce done in ")
    assert "gold offset_mapping ..." in lines and any(line.startswith("gold offset_mapping done") for line in lines)
    assert [line for line in lines if "records" in line] == [
        "A->B records: 10 done, 90 remaining",
        "A->B records: 100 done, 0 remaining",
    ]


def test_on_a_terminal_rich_draws_the_steps(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(RuntimeError), Steps(rich=True) as steps:
        with steps.step("resolve"):
            pass
        steps.counts("A->B records", 3, 1)
        with steps.step("build"):
            raise RuntimeError("boom")
    err = capsys.readouterr().err
    assert "resolve" in err and "3/4" in err and "build (failed)" in err
