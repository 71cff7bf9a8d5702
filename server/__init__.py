"""The A2A server: write an agent against the agent API, then serve it.

The agent API (`a2a_grpc.server.agent`, the import path agents use): `AgentExecutor`,
`RequestContext`, `TaskEvents`, `Skill` and the errors an agent may raise. Serving from Python:
`start_server(ServerPlan(config, agent, ...))` returns a `RunningServer` (its address, its
`stop`, its reloads); `ServerConfig` holds every setting `a2a-grpc serve` has an option for.
Another way for callers to authenticate plugs in as an `Authenticator` given in
`ServerPlan(authenticators=...)`: it checks what a call `Presented` (raising
`AuthenticationError`) and states its scheme on the card (`CardSecurity`).
The packages below this one (protocol, tasks, push, trust, ops, transports) are the server's
inside: their names may change between releases, but for the way to add a task store
(docs/stores.md): the contract `a2a_grpc.server.tasks.base`, the registry
`a2a_grpc.server.tasks.registry` and the contract suite `a2a_grpc.server.tasks.contract`.
"""

from a2a_grpc.server.agent import (
    AgentContractError,
    AgentExecutor,
    BudgetExceededError,
    RequestContext,
    Skill,
    TaskEvents,
    TaskMemoryFullError,
    agent_message,
)
from a2a_grpc.server.app import RunningServer, ServerPlan, StartupError, start_server
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.trust.auth import AuthenticationError, Authenticator, CardSecurity, Presented

__all__ = [
    "AgentContractError",
    "AgentExecutor",
    "AuthenticationError",
    "Authenticator",
    "BudgetExceededError",
    "CardSecurity",
    "Presented",
    "RequestContext",
    "RunningServer",
    "ServerConfig",
    "ServerPlan",
    "Skill",
    "StartupError",
    "TaskEvents",
    "TaskMemoryFullError",
    "agent_message",
    "start_server",
]
