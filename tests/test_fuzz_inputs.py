"""Generated input for every parser a user or a cluster feeds (issue 33, Build): never a traceback.

Each parser either returns its value or raises the project's own ``MirrorlakeError`` (the CLI
prints those as one ``error:`` line with a documented exit code); any other exception escaping is
a bug Hypothesis finds here. Nothing here measures time: pytest-timeout is the harness's only
bound, so a parser that hangs on some input fails this run instead of passing.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.sql import parse_as_of
from mirrorlake.cli import main
from replicator.config import load_config, parse_config
from replicator.errors import ExitCode, MirrorlakeError
from replicator.events.codec import HEADER_LEN, MAGIC, decode, registry
from replicator.failover.times import parse_time

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
TIMEISH = st.one_of(
    st.text(max_size=40),
    st.from_regex(r"[+-]?[0-9]{1,25}", fullmatch=True),
    st.from_regex(r"-?[0-9]{1,5}-[0-9]{1,3}-[0-9]{1,3}([T ][0-9]{1,3}:[0-9]{1,3}(:[0-9]{1,3}(\.[0-9]{1,9})?)?)?"
                  r"(Z|[+-][0-9]{1,3}(:[0-9]{1,3})?)?", fullmatch=True),
)  # fmt: skip


@FUZZ
@given(TIMEISH)
def test_at_times_parse_or_are_one_named_error(text: str):
    with contextlib.suppress(MirrorlakeError):
        assert isinstance(parse_time(text), int)


@FUZZ
@given(TIMEISH)
def test_as_of_values_parse_or_are_one_named_error(text: str):
    with contextlib.suppress(MirrorlakeError):
        parse_as_of(text)


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20))
KEYS = st.sampled_from(
    ["clusters", "flows", "A", "B", "bootstrap_servers", "client", "source", "target", "topics", "groups",
     "replication_policy", "class", "separator", "state_topic", "lakehouse", "path", "offset_lag_max",
     "exactly_once", "on_topic_recreated", "status_port", "spark", "conf"]
)  # fmt: skip
DOCS = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
                    max_leaves=12)  # fmt: skip


@FUZZ
@given(DOCS)
def test_config_documents_validate_or_are_one_named_error(doc):
    with contextlib.suppress(MirrorlakeError):
        parse_config(doc, source="fuzz")


@FUZZ
@given(st.one_of(st.text(max_size=200), DOCS.map(lambda d: yaml.safe_dump(d, default_flow_style=True))))
def test_config_files_load_or_are_one_named_error(tmp_path: Path, text: str):
    path = tmp_path / "fuzz.yaml"
    path.write_text(text, encoding="utf-8")
    with contextlib.suppress(MirrorlakeError):
        load_config(path)


PROPERTY_KEYS = st.sampled_from(["clusters", "A.bootstrap.servers", "B.bootstrap.servers", "A->B.enabled",
                                 "A->B.topics", "topics.exclude", "replication.policy.class",
                                 "replication.policy.separator", "A->B.offset.lag.max", "sync.topic.configs.enabled",
                                 "emit.checkpoints.interval.seconds", "A.security.protocol", "groups"])  # fmt: skip
PROPERTY_VALUES = st.one_of(st.text(max_size=30), st.sampled_from(["A, B", "true", "false", ".*", "(", "7", "-1"]))


@FUZZ
@given(st.lists(st.tuples(PROPERTY_KEYS | st.text(max_size=15), PROPERTY_VALUES), max_size=8))
def test_mm2_properties_translate_or_are_one_named_error(tmp_path: Path, lines):
    path = tmp_path / "fuzz.properties"
    path.write_text("".join(f"{k} = {v}\n" for k, v in lines), encoding="iso-8859-1", errors="replace")
    with contextlib.suppress(MirrorlakeError):
        load_config(path)


FINGERPRINTS = st.sampled_from([v.fingerprint for t in registry().event_types() for v in registry().versions(t)])


@FUZZ
@given(st.one_of(st.binary(max_size=200), st.tuples(FINGERPRINTS, st.binary(max_size=200)).map(
    lambda fb: MAGIC + fb[0] + fb[1])))  # fmt: skip
def test_state_records_decode_or_are_one_named_error(data: bytes):
    assert len(MAGIC) + 8 == HEADER_LEN
    with contextlib.suppress(MirrorlakeError):
        decode(data)


DOCUMENTED = {int(code) for code in ExitCode}


@FUZZ
@given(
    st.sampled_from([["sql", "SELECT 1", "--as-of"], ["failover", "plan", "--flow", "A->B", "--at"],
                     ["failover", "plan", "--flow", "A->B", "--groups", ".*", "--at"], ["replicate", "--status-port"]]),
    TIMEISH,
)  # fmt: skip
def test_the_cli_answers_every_value_with_a_documented_exit(tmp_path: Path, monkeypatch, capsys, head, value):
    """Offline: the config does not exist, so a value that parses ends at that error, never further."""
    missing = str(tmp_path / "no-such-config.yaml")
    monkeypatch.setattr(sys, "argv", ["mirrorlake", *head, value, "-c", missing, "--lakehouse", str(tmp_path)]
                        if head[0] == "sql" else ["mirrorlake", *head, value, "-c", missing])  # fmt: skip
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code in DOCUMENTED and (code == 0 or err.startswith("error: ")), (code, err)
