"""Names and values from outside reach a terminal or a page as plain text (issue 33, item 6).

A group named ``ESC ] 0 ; ... BEL`` put terminal control sequences into the ``error:`` line and a
topic with an embedded newline forged table rows; a 100 KB value was echoed whole; names went
into ``st.markdown`` as Markdown. Pure tests of ``replicator.text.printable``, the dashboard's
``fmt.text``/``fmt.code``, the SQL table renderer, and the CLI's ``error:`` line in-process.
"""

from __future__ import annotations

import contextlib
import sys

from hypothesis import given
from hypothesis import strategies as st

from dashboards import fmt
from lakehouse.sql import QueryResult, format_result
from mirrorlake.cli import main
from replicator.text import ERROR_LIMIT, printable

TITLE = "\x1b]0;owned\x07"  # sets the terminal's title
FORGED = "orders\nA.orders  0  999  999  exact"  # a second table row, from a topic name


@given(st.text())
def test_nothing_printable_returns_can_move_the_cursor_or_start_a_sequence(value: str):
    out = printable(value)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or c in "\u202a\u202b\u202c\u202d\u202e" for c in out)


def test_escapes_are_visible_and_long_values_are_cut():
    assert printable(TITLE) == "\\x1b]0;owned\\x07"
    assert printable(FORGED).count("\n") == 0 and "\\x0a" in printable(FORGED)
    assert printable("\u202eevil") == "\\u202eevil"
    cut = printable("g" * 100_000, limit=ERROR_LIMIT)
    assert len(cut) < ERROR_LIMIT + 40 and cut.endswith("... (100000 characters)")


def test_a_sql_table_shows_one_row_per_row():
    rendered = format_result(QueryResult(["topic"], [(FORGED,), (TITLE,)]), "table")
    assert rendered.count("\n") == 4 and "\x1b" not in rendered  # header, rule, two rows, count


def test_csv_lines_end_with_a_newline_and_a_value_with_one_is_quoted():
    """Issue 38: CRLF line ends were the csv module's default; a line feed inside a value stays quoted."""
    rendered = format_result(QueryResult(["flow", "topic"], [("A->B", "orders"), ("A->B", "a\nb")]), "csv")
    assert rendered == 'flow,topic\nA->B,orders\nA->B,"a\nb"\n'


def test_the_dashboard_shows_names_as_text_not_markdown():
    assert fmt.text("A->B") == "A->B"
    shown = fmt.text("[click](http://evil) ![i](x) *b* $x$" + TITLE)
    assert "\\[click\\]" in shown and "\\*b\\*" in shown and "\\$x\\$" in shown and "\x1b" not in shown
    assert fmt.code("a``b") == "``` a``b ```"


def test_the_error_line_is_one_escaped_line(tmp_path, monkeypatch, capsys):
    where = tmp_path / (TITLE + "\nerror: forged")
    for _ in range(12):  # 2,400 characters of path: longer than an error line may be
        where = where / ("x" * 200)
    monkeypatch.setattr(sys, "argv", ["mirrorlake", "sql", "SELECT 1", "--lakehouse", str(where)])
    with contextlib.suppress(SystemExit):
        main()
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "\x1b" not in err and "\\x1b]0;owned\\x07" in err and len(err) < ERROR_LIMIT + 80
