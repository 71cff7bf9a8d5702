"""Prometheus metrics of one server, served at `/metrics` on its HTTP port.

Each server has its own `CollectorRegistry` (never the process-wide default), so several servers
in one process never mix their figures. Two kinds of figures:

- per call: `RpcMetrics.observe`, called by the servicer's call gate once per finished call or
  stream of every transport, with its RPC, status code, transport and duration (also for
  gRPC calls refused while the server drains, and JSON-RPC requests refused before they name
  an A2A method);
- state: read when /metrics is scraped (`ServerMetrics.collect`), never kept up to date on the
  way: calls and streams open, tasks by state, the store's size, webhook deliveries, the
  audit trail's records, and the failures of the parts behind the calls whose repeats the log
  only summarizes; readiness and the drain; and the limits the gauges are bounded by (each
  `<gauge>_limit` beside its gauge, so that a ratio needs no configuration in the query).

deploy/grafana/a2a-grpc.json and deploy/prometheus/a2a-grpc-rules.yaml are built on these
names (docs/operations.md, "Dashboard and alerts"): a test scrapes a server and fails when
they name a metric or label it does not export.

The exposition is prometheus_client's (`generate_latest`); nothing is formatted by hand.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Iterator
from typing import Protocol

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.protocol.gate import CallGate
from a2a_grpc.server.protocol.handler import RequestHandler
from a2a_grpc.server.protocol.outcomes import ARTIFACT_BUCKETS, CHUNK_BUCKETS, Outcomes
from a2a_grpc.server.tasks.base import StoreStats, StoreUnavailableError

log = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
CONTENT_TYPE = CONTENT_TYPE_LATEST
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Upper bounds (seconds) of the duration histogram's buckets; +Inf follows."""
INVALID_REQUEST_RPC = "(invalid request)"
"""The `method` label of calls refused before they named an A2A method (an unreadable JSON-RPC
body or envelope, an unknown method): one label for all, so hostile input cannot add series."""


class Readiness(Protocol):
    """What Health says of the server as a whole (app.HealthBoard)."""

    @property
    def draining(self) -> bool:
        """True once the server is stopping."""
        ...

    def unready_reason(self) -> str | None:
        """Why the server takes no new work now (/readyz answers 503); None while it does."""
        ...


class _Series:
    """One (method, code, transport)'s calls: how many, their total duration, per bucket."""

    __slots__ = ("buckets", "count", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.buckets = [0] * (len(BUCKETS) + 1)  # non-cumulative; the last one is +Inf


class RpcMetrics:
    """Request counts and durations per RPC, status code and transport.

    One `observe` per call: a dict lookup, three additions and a bisect, ~0.12 µs; a labelled
    prometheus_client Counter and Histogram child cost ~0.9 µs together (their locks), measured
    with timeit. Not thread-safe: the server calls it from its event loop only.
    """

    def __init__(self) -> None:
        self._series: dict[tuple[str, str, str], _Series] = {}

    def observe(self, rpc: str, code: str, transport: str, seconds: float) -> None:
        """Counts one finished call (a stream counts when it ends) that took `seconds`."""
        key = (rpc, code, transport)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _Series()
        series.count += 1
        series.total += seconds
        series.buckets[bisect_left(BUCKETS, seconds)] += 1

    def families(self) -> Iterator[Metric]:
        labels = ["method", "code", "transport"]
        requests = CounterMetricFamily(
            "a2a_rpc_requests",
            "A2A calls and streams finished, by RPC, status code and transport",
            labels=labels,
        )
        durations = HistogramMetricFamily(
            "a2a_rpc_duration_seconds",
            "Time from a call's arrival to its answer (a stream: to its end)",
            labels=labels,
        )
        for key, series in list(self._series.items()):
            requests.add_metric(list(key), series.count)
            cumulative, buckets = 0, []
            for bound, count in zip((*map(str, BUCKETS), "+Inf"), series.buckets, strict=True):
                cumulative += count
                buckets.append((bound, cumulative))
            durations.add_metric(list(key), buckets, series.total)
        yield requests
        yield durations


class ServerMetrics:
    """The registry of one server and the collector that reads its state at scrape time."""

    def __init__(
        self, gate: CallGate, handler: RequestHandler, rpcs: RpcMetrics, readiness: Readiness
    ) -> None:
        self.gate = gate
        self.handler = handler
        self.rpcs = rpcs
        self.readiness = readiness
        self.registry = CollectorRegistry(auto_describe=False)
        self._stats: StoreStats | None = None
        self.registry.register(self)

    async def exposition(self) -> bytes:
        """The text exposition of every metric now (reads the store's figures first: a shared
        store answers over the network; when it does not, its figures are left out)."""
        try:
            self._stats = await self.handler.store.stats()
        except StoreUnavailableError:
            self._stats = None
        return generate_latest(self.registry)

    def collect(self) -> Iterator[Metric]:
        gate = self.gate
        handler = self.handler
        yield from self.rpcs.families()
        readiness = self.readiness
        yield GaugeMetricFamily(
            "a2a_ready",
            "1 while the server takes new work (/readyz 200, Health SERVING); 0 while it drains, "
            "its task store does not answer, or audit records cannot be written and it fails "
            "closed",
            value=0 if readiness.unready_reason() is not None else 1,
        )
        yield GaugeMetricFamily(
            "a2a_draining",
            "1 once the server is stopping (SIGTERM/SIGINT: the drain delay, then the drain)",
            value=1 if readiness.draining else 0,
        )
        yield GaugeMetricFamily(
            "a2a_calls_in_flight", "A2A unary calls being handled now", value=gate.calls
        )
        yield GaugeMetricFamily(
            "a2a_calls_in_flight_limit",
            "A2A unary calls handled at once at most (--max-concurrent-calls)",
            value=gate.max_calls,
        )
        yield GaugeMetricFamily(
            "a2a_open_streams", "A2A streams open now (every transport)", value=gate.streams
        )
        yield GaugeMetricFamily(
            "a2a_open_streams_limit",
            "A2A streams open at once at most (--max-open-streams)",
            value=gate.max_streams,
        )
        config = handler.config
        yield GaugeMetricFamily(
            "a2a_store_tasks_limit",
            "Tasks the task store keeps (--max-tasks)",
            value=config.max_tasks,
        )
        stats = self._stats
        if stats is not None:
            yield GaugeMetricFamily("a2a_store_tasks", "Tasks in the task store", value=stats.tasks)
            if stats.bytes is not None:
                yield GaugeMetricFamily(
                    "a2a_store_bytes",
                    "Bytes of tasks counted against --max-store-bytes",
                    value=stats.bytes,
                )
                yield GaugeMetricFamily(
                    "a2a_store_bytes_limit",
                    "Bytes of tasks the task store keeps (--max-store-bytes)",
                    value=config.max_store_bytes,
                )
            if stats.by_state is not None:
                tasks = GaugeMetricFamily(
                    "a2a_tasks", "Tasks in the task store by state", labels=["state"]
                )
                for state, count in sorted(stats.by_state.items()):
                    tasks.add_metric([state_label(state)], count)
                yield tasks
        yield from _outcome_families(handler.outcomes)
        ignored = CounterMetricFamily(
            "a2a_ignored_request_fields",
            "Members of JSON-RPC and HTTP+JSON requests ignored because A2A 1.0 has no such "
            "field (spec 5.7), by message type and member; past 64 names, under other",
            labels=["field"],
        )
        for name, count in sorted(gate.ignored_fields.counts.items()):
            ignored.add_metric([name], count)
        yield ignored
        failures = CounterMetricFamily(
            "a2a_component_failures",
            "Failures of the parts behind the calls (the log says the first of an outage, then "
            "at most a line a minute): task store round trips, housekeeping sweeps, webhook "
            "POSTs and audit log writes",
            labels=["component"],
        )
        failures.add_metric(["task_store"], handler.store.failures)
        failures.add_metric(["housekeeping"], handler.housekeeping.failures.failures)
        webhooks = handler.webhooks
        if webhooks is not None:
            failures.add_metric(["webhooks"], webhooks.failures)
        if handler.audit is not None:
            failures.add_metric(["audit_log"], handler.audit.write_failures.failures)
        yield failures
        if webhooks is not None:
            yield CounterMetricFamily(
                "a2a_webhook_deliveries",
                "Webhook events delivered (a 2xx answer)",
                value=webhooks.delivered,
            )
            yield CounterMetricFamily(
                "a2a_webhook_retries",
                "Webhook POSTs tried again after a failed attempt",
                value=webhooks.retries,
            )
            yield CounterMetricFamily(
                "a2a_webhook_give_ups",
                "Webhooks given up (attempts exhausted, refused target, queue overflow)",
                value=webhooks.given_up,
            )
        audit = handler.audit
        if audit is not None:
            yield CounterMetricFamily(
                "a2a_audit_records_written",
                "Audit records written to the audit log",
                value=audit.written,
            )
            yield CounterMetricFamily(
                "a2a_audit_records_lost",
                "Audit records dropped because the backlog was full while writes failed",
                value=audit.lost,
            )


def _outcome_families(outcomes: Outcomes) -> Iterator[Metric]:
    answers = CounterMetricFamily(
        "a2a_answers",
        "Messages answered, by kind: a direct reply (no task) or a task; by the skill the agent "
        "named for the run",
        labels=["kind", "skill"],
    )
    artifacts = HistogramMetricFamily(
        "a2a_task_artifacts",
        "Artifacts a task holds when it finishes (a terminal state)",
        labels=["skill"],
    )
    without = CounterMetricFamily(
        "a2a_tasks_without_artifacts",
        "Tasks that finished holding no artifact, by final state",
        labels=["skill", "state"],
    )
    chunks = HistogramMetricFamily(
        "a2a_artifact_chunks",
        "Chunks an artifact came in (a whole artifact: 1), observed when the run that sent its "
        "last chunk settles",
        labels=["skill"],
    )
    for skill, counts in sorted(outcomes.by_skill.items()):
        answers.add_metric(["direct_reply", skill], counts.direct_replies)
        answers.add_metric(["task", skill], counts.tasks)
        artifacts.add_metric(
            [skill], _cumulative(ARTIFACT_BUCKETS, counts.artifact_buckets), counts.artifacts
        )
        for state, count in sorted(counts.without_artifacts.items()):
            without.add_metric([skill, state], count)
        chunks.add_metric([skill], _cumulative(CHUNK_BUCKETS, counts.chunk_buckets), counts.chunks)
    yield answers
    yield artifacts
    yield without
    yield chunks


def _cumulative(bounds: tuple[int, ...], counts: list[int]) -> list[tuple[str, int]]:
    """Prometheus buckets (`le` label, cumulative count) from per-bucket counts; +Inf last."""
    cumulative, buckets = 0, []
    labels = (*(str(float(bound)) for bound in bounds), "+Inf")
    for label, count in zip(labels, counts, strict=True):
        cumulative += count
        buckets.append((label, cumulative))
    return buckets


def state_label(state: int) -> str:
    """`TASK_STATE_INPUT_REQUIRED` -> `input_required`."""
    return str(a2a_pb2.TaskState.Name(state)).removeprefix("TASK_STATE_").lower()
