"""`a2a-grpc serve`: runs the server until SIGTERM or SIGINT, then shuts down gracefully."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib
import logging
import signal
import sys
from typing import Any

from a2a_grpc.server.agent import AgentExecutor
from a2a_grpc.server.app import PortInUseError, start_server
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent


def _parser() -> argparse.ArgumentParser:
    defaults = ServerConfig()
    parser = argparse.ArgumentParser(
        prog="a2a-grpc serve", description="Run an A2A 1.0 gRPC server."
    )
    parser.add_argument("--host", default=defaults.host, help="address to bind (%(default)s)")
    parser.add_argument(
        "--port", type=int, default=defaults.port, help="port to bind, 0 for any (%(default)s)"
    )
    parser.add_argument(
        "--agent",
        default=None,
        metavar="MODULE:ATTR",
        help="agent to run: an AgentExecutor instance, or a class/factory taking no arguments "
        "(default: the built-in demo agent)",
    )
    parser.add_argument("--max-tasks", type=int, default=defaults.max_tasks)
    parser.add_argument(
        "--task-ttl", type=float, default=defaults.task_ttl, help="seconds a finished task is kept"
    )
    parser.add_argument(
        "--max-inline-bytes",
        type=int,
        default=defaults.max_inline_bytes,
        help="largest raw part accepted inline",
    )
    parser.add_argument(
        "--strict-version",
        action="store_true",
        help="refuse requests without a2a-version metadata (the spec treats them as 0.3)",
    )
    parser.add_argument(
        "--shutdown-grace", type=float, default=defaults.shutdown_grace, help="seconds"
    )
    return parser


def load_agent(spec: str | None) -> AgentExecutor:
    """`package.module:attr` → an agent; attr may be an instance or a zero-argument factory."""
    if spec is None:
        return DemoAgent()
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"--agent {spec!r}: expected package.module:attr")
    try:
        target: Any = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--agent {spec!r}: {exc}") from exc
    agent = target() if isinstance(target, type) or not hasattr(target, "execute") else target
    if not callable(getattr(agent, "execute", None)):
        raise ValueError(f"--agent {spec!r} has no execute(context, events) coroutine")
    return agent  # type: ignore[no-any-return]


async def _serve(config: ServerConfig, agent: AgentExecutor) -> int:
    try:
        running = await start_server(config, agent)
    except PortInUseError as exc:
        print(f"a2a-grpc serve: {exc}", file=sys.stderr)
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    settings = ", ".join(f"{f.name}={getattr(config, f.name)}" for f in dataclasses.fields(config))
    print(f"a2a-grpc: serving A2A 1.0 over gRPC on {config.host}:{running.port}", flush=True)
    print(f"a2a-grpc: agent {type(agent).__module__}.{type(agent).__qualname__}", flush=True)
    print(f"a2a-grpc: settings {settings}", flush=True)
    print("a2a-grpc: no authentication configured: every caller is served", flush=True)
    await stop.wait()
    print("a2a-grpc: shutting down", flush=True)
    await running.stop()
    return 0


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        agent = load_agent(args.agent)
        config = ServerConfig(
            host=args.host,
            port=args.port,
            max_tasks=args.max_tasks,
            task_ttl=args.task_ttl,
            max_inline_bytes=args.max_inline_bytes,
            strict_version=args.strict_version,
            shutdown_grace=args.shutdown_grace,
        )
    except ValueError as exc:
        print(f"a2a-grpc serve: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_serve(config, agent))
