"""The suite's own schedule (``tests/conftest.py``): the long modules it hands out first exist and
run outside the Spark unit, so renaming one cannot silently put it back at the end of the run."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import _LONG_MODULES, _SPARK_RESOURCES

ROOT = Path(__file__).resolve().parent.parent


def test_every_long_module_exists_and_is_a_unit_of_its_own() -> None:
    for module in _LONG_MODULES:
        path = ROOT / module
        assert path.is_file(), f"{module} is in _LONG_MODULES but does not exist"
        assert not _SPARK_RESOURCES.search(path.read_text()), f"{module} runs in the Spark unit, not on its own"
