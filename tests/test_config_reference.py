"""The configuration reference is generated from the config model and kept current."""

from __future__ import annotations

from pathlib import Path

from replicator.config import MirrorlakeConfig
from replicator.config.reference import reference_markdown, rows

DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration-reference.md"


def test_the_committed_reference_is_the_generated_one():
    assert DOC.read_text(encoding="utf-8") == reference_markdown(), "run `make docs` and commit the result"


def test_every_key_is_listed_with_a_type_a_default_and_a_description():
    listed = {r.key: r for r in rows()}
    assert all(r.type and r.default and r.description for r in listed.values()), [
        k for k, r in listed.items() if not r.description
    ]
    # every field of every section, by walking the model independently of the generator
    assert set(MirrorlakeConfig.model_fields) <= set(listed)
    assert "flows[].on_topic_recreated" in listed and listed["flows[].on_topic_recreated"].type == "continue \\| stop"
    assert listed["clusters.<name>.bootstrap_servers"].default == "required"
    assert listed["flows[].offset_lag_max"].default == "`100`"
    assert listed["replication_policy.class"].default == "`default`"  # the alias, as YAML spells it


def test_every_documented_key_is_one_the_loader_accepts():
    """A key taken from the reference is accepted by ``parse_config`` (none is invented)."""
    from replicator.config import parse_config

    flow = {
        r.key.removeprefix("flows[].")
        for r in rows()
        if r.key.startswith("flows[].") and r.type in ("boolean", "integer", "number")
    }
    base = {"clusters": {"A": {"bootstrap_servers": "h:1"}, "B": {"bootstrap_servers": "h:2"}}}
    values = {"boolean": True, "integer": 7, "number": 7.0}
    kinds = {r.key.removeprefix("flows[]."): r.type for r in rows()}
    config = parse_config({**base, "flows": [{"source": "A", "target": "B", **{k: values[kinds[k]] for k in flow}}]})
    assert config.flows[0].offset_lag_max == 7
