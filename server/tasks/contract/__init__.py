"""The task-store contract suite (tasks/base.py), for pytest: every store passes it, the
built-in ones (tests/integration/test_store_contract.py) and one a package adds
(docs/stores.md, "Writing a store").

It needs pytest and pytest-asyncio, which the server does not (`pip install
a2a-grpc[store-contract]` brings them); nothing imports this package but a test. A test module
subclasses one of the two classes, names it `Test...` and gives the `store_factory` fixture,
the `StoreFactory` of the stores under test:

    import pytest
    from a2a_grpc.server.tasks.contract import SharedStoreContract, StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        def store_factory(self):
            return MY_KIND.factory("mystore://...")

- `StoreContract`: one store at a time (reads, writes, streams and their event ids, replay,
  withdrawals, the byte budget, cancels, ListTasks, room and eviction, push configs).
- `SharedStoreContract`: the same, and two replicas on one backend (remote cancels, leases,
  claims, events and page tokens across them), for a kind whose `shared` is True: every store
  its factory makes shares one backend, and the class also defines `abandon(store)`.

Each test opens its stores through `make_store` and they are closed after it. A class may
override `assert_nothing_left` (look into the backend after tasks went), `event_id_order` (ids
that are neither "<n>" nor "<ms>-<seq>") and `push_configs_of`. The tests run under
pytest-asyncio in strict or auto mode (they carry its mark).
"""

from a2a_grpc.server.tasks.contract.replicas import SharedStoreContract
from a2a_grpc.server.tasks.contract.single import StoreContract
from a2a_grpc.server.tasks.contract.support import (
    ALICE,
    BOB,
    MakeStore,
    RecordedListener,
    agent_text,
    created,
    drain,
    kinds,
    new_task,
)

__all__ = [
    "ALICE",
    "BOB",
    "MakeStore",
    "RecordedListener",
    "SharedStoreContract",
    "StoreContract",
    "agent_text",
    "created",
    "drain",
    "kinds",
    "new_task",
]
