"""The API reference (`make docs`) leaves no public name undocumented.

It reads the public API the way the reference generator does (pdoc's own model of each module:
the names in `__all__`, and for each class the public fields, properties and methods it
defines), so a name shows in this test exactly when it shows on the reference's pages. A member
that overrides one its base class documents (an error class's `code`, say) takes that
documentation, as a reader of the base class's entry would."""

from __future__ import annotations

import pytest

pdoc_doc = pytest.importorskip("pdoc.doc")

REFERENCE = (
    "a2a_grpc.server",
    "a2a_grpc.server.agent",
    "a2a_grpc.server.tasks.base",
    "a2a_grpc.server.tasks.registry",
    "a2a_grpc.client",
    "a2a_grpc.core.errors",
)
"""The modules `make docs` documents (the Makefile's API_MODULES)."""


def _documented_in_a_base(cls: type, name: str) -> bool:
    for base in cls.__mro__[1:]:
        if base is object or name not in vars(base):
            continue
        base_doc = pdoc_doc.Class(base.__module__, base.__qualname__, base, (base.__module__, ""))
        member = base_doc.members.get(name)
        if member is not None and member.docstring.strip():
            return True
    return False


def _undocumented(module_name: str) -> list[str]:
    module = pdoc_doc.Module.from_name(module_name)
    missing = []
    for member in module.members.values():
        if member.name.startswith("_"):
            continue
        if not member.docstring.strip():
            missing.append(member.name)
        if not isinstance(member, pdoc_doc.Class):
            continue
        for own in member.own_members:
            if own.name.startswith("_"):
                continue
            if own.docstring.strip() or _documented_in_a_base(member.obj, own.name):
                continue
            missing.append(f"{member.name}.{own.name}")
    return missing


def test_the_makefile_documents_these_modules() -> None:
    from pathlib import Path

    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    (line,) = [line for line in makefile.splitlines() if line.startswith("API_MODULES")]
    assert tuple(line.split(":=", 1)[1].split()) == REFERENCE


@pytest.mark.parametrize("module_name", REFERENCE)
def test_every_public_name_has_a_docstring(module_name: str) -> None:
    missing = _undocumented(module_name)
    assert not missing, (
        f"{module_name}: public names without a docstring, so the API reference shows them "
        f"bare; document each (an attribute takes a string literal on the line after it): "
        f"{', '.join(missing)}"
    )
