"""a2a-grpc's store contract suite on the example store, found by its scheme through the
entry point this package registers (installed, the store registry sees it)."""

from __future__ import annotations

import pytest
from a2a_store_example import EXAMPLE, ExampleTaskStore

from a2a_grpc.server.tasks.base import StoreFactory
from a2a_grpc.server.tasks.contract import MakeStore, StoreContract
from a2a_grpc.server.tasks.registry import registered_schemes, store_kind


def test_the_scheme_is_registered_by_the_entry_point() -> None:
    assert "example" in registered_schemes()
    assert store_kind("example://contract") is EXAMPLE
    assert EXAMPLE.check("example://") is not None


class TestExampleStore(StoreContract):
    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        return store_kind("example://contract").factory("example://contract")

    async def test_the_store_is_the_example_store(self, make_store: MakeStore) -> None:
        store = await make_store()
        assert isinstance(store, ExampleTaskStore) and store.name == "contract" and store.started
