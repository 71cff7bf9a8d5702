"""`serve --agent SPEC`: finds the agent a spec names and makes it.

SPEC is `MODULE:ATTR` or `PATH.py:ATTR`:
- `MODULE` (`mypkg.agents`) is imported as usual, with the current directory first on
  `sys.path`, so a module or package in the directory `serve` runs from is found, as with
  `python -m`;
- `PATH.py` (`agents/shout.py`, relative to the current directory or absolute) is loaded as
  a module named after the file, with its own directory first on `sys.path` so that it can
  import the modules beside it.
ATTR is an agent instance (anything with an `execute` coroutine), or a class or factory called
with no arguments that returns one. Every problem is a ValueError of one line naming it.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from a2a_grpc.server.agent import AgentExecutor


@dataclass(frozen=True)
class LoadedAgent:
    agent: AgentExecutor
    spec: str
    """The spec as given (what the start-up line names)."""


def load_agent(spec: str) -> LoadedAgent:
    """The agent `spec` names (module docstring); ValueError naming what is wrong."""
    where, colon, attr = spec.rpartition(":")
    if not colon or not where or not attr:
        raise ValueError(
            f"--agent {spec!r}: expected MODULE:ATTR (mypkg.agents:MyAgent) or "
            "PATH.py:ATTR (agents/my_agent.py:MyAgent)"
        )
    if where.endswith(".py") or "/" in where or os.sep in where:
        module = _from_file(spec, Path(where))
    else:
        module = _from_module(spec, where)
    try:
        target: Any = getattr(module, attr)
    except AttributeError:
        raise ValueError(f"--agent {spec!r}: {module.__name__} has no attribute {attr!r}") from None
    agent = target
    if isinstance(target, type) or not hasattr(target, "execute"):
        if not callable(target):
            raise ValueError(
                f"--agent {spec!r}: {attr} is a {type(target).__name__}, not an agent, class "
                "or factory"
            )
        try:
            agent = target()
        except Exception as exc:
            raise ValueError(
                f"--agent {spec!r}: calling {attr}() failed: {type(exc).__name__}: {exc}"
            ) from exc
    problem = executor_problem(agent)
    if problem is not None:
        raise ValueError(f"--agent {spec!r}: {problem}")
    return LoadedAgent(agent, spec)


def executor_problem(agent: object) -> str | None:
    """Why `agent` cannot serve as an AgentExecutor, or None: it needs an `execute` that is a
    coroutine function (`async def`), or a callable whose `__call__` is one. A plain `def
    execute` would pass a mere "callable" check, then fail every task with a TypeError."""
    execute = getattr(agent, "execute", None)
    name = type(agent).__name__
    if not callable(execute):
        return f"{name} has no execute(context, events) coroutine"
    if inspect.iscoroutinefunction(execute) or inspect.iscoroutinefunction(
        type(execute).__call__  # an object whose __call__ is async
    ):
        return None
    return (
        f"{name}.execute is a plain function: declare it `async def execute(self, context, events)`"
    )


def _from_module(spec: str, name: str) -> ModuleType:
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise ValueError(
                f"--agent {spec!r}: no module named {exc.name!r} in {here} or the installed "
                "packages"
            ) from None
        raise ValueError(f"--agent {spec!r}: importing {name} failed: {exc}") from exc
    except Exception as exc:  # the module's own code failed: SyntaxError, its imports, ...
        raise ValueError(
            f"--agent {spec!r}: importing {name} failed: {type(exc).__name__}: {exc}"
        ) from exc


def _from_file(spec: str, path: Path) -> ModuleType:
    if path.suffix != ".py":
        raise ValueError(f"--agent {spec!r}: {path} is not a .py file")
    if not path.is_file():
        raise ValueError(f"--agent {spec!r}: no such file {path.resolve()}")
    path = path.resolve()
    name = path.stem
    known = sys.modules.get(name)
    if known is not None:
        if getattr(known, "__file__", None) == str(path):
            return known
        raise ValueError(
            f"--agent {spec!r}: the file's module name {name!r} is taken by another module; "
            "rename the file"
        )
    loader = importlib.util.spec_from_file_location(name, path)
    if loader is None or loader.loader is None:
        raise ValueError(f"--agent {spec!r}: {path} cannot be loaded as a module")
    module = importlib.util.module_from_spec(loader)
    directory = str(path.parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    sys.modules[name] = module  # before it runs, as an import does (dataclasses need it)
    try:
        loader.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ValueError(
            f"--agent {spec!r}: loading {path} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return module
