"""The mypyc experiment's module lists (tests/load/compiled.py) name files that exist.

No compiler needed: this only keeps COMPILED and NOT_COMPILED from rotting silently when a
module moves or is deleted.
"""

from __future__ import annotations

from pathlib import Path

from tests.load.compiled import COMPILED, NOT_COMPILED, PACKAGES

ROOT = Path(__file__).resolve().parents[2]


def test_every_listed_module_is_a_file_of_the_package() -> None:
    listed = [*COMPILED, *NOT_COMPILED]
    missing = [path for path in listed if not (ROOT / path).is_file()]
    assert not missing
    assert all(path.endswith(".py") and path.split("/")[0] in PACKAGES for path in listed)


def test_no_module_is_both_compiled_and_excluded() -> None:
    assert len(set(COMPILED)) == len(COMPILED)
    assert not set(COMPILED) & set(NOT_COMPILED)
    assert all(reason.strip() for reason in NOT_COMPILED.values())
