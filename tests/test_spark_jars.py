"""Shipped jars instead of ivy (the lakehouse image): ``adopt_jars`` records them only when every package is there."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.spark import adopt_jars, resolved_jars, spark_packages
from replicator.errors import DependencyResolutionError


def _jar(directory: Path, package: str) -> Path:
    path = directory / "{}_{}-{}.jar".format(*package.split(":"))
    path.write_bytes(b"PK")
    return path


def test_adopted_jars_are_the_resolved_packages_and_a_missing_one_is_named(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("MIRRORLAKE_CACHE", str(tmp_path / "cache"))
    jars = tmp_path / "jars"
    jars.mkdir()
    first, *others = spark_packages()
    staged = [_jar(jars, p) for p in others] + [jars / "org.slf4j_slf4j-api-2.0.13.jar"]
    staged[-1].write_bytes(b"PK")
    with pytest.raises(DependencyResolutionError, match=first.replace(".", r"\.")):
        adopt_jars(jars)
    assert resolved_jars() == []  # nothing recorded
    staged.append(_jar(jars, first))
    manifest = adopt_jars(jars)
    assert manifest.is_relative_to(tmp_path / "cache")
    assert sorted(resolved_jars()) == sorted(p.resolve() for p in staged)  # the dependencies too
