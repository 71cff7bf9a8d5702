"""The operators' pack, deploy/grafana/a2a-grpc.json and deploy/prometheus/a2a-grpc-rules.yaml,
against what a real `a2a-grpc serve` exports: every metric, label and label value their
queries name is in its /metrics (scraped after calls, a failed one among them, so the series
exist), and every metric it exports has a panel. promtool accepts the rules, passes their unit
tests (deploy/prometheus/a2a-grpc-rules.test.yaml) and parses every dashboard query.

Without promtool (Debian's `prometheus` package) its tests skip, or fail with
A2A_GRPC_REQUIRE_PROMTOOL=1 (CI)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server.ops.metrics import INVALID_REQUEST_RPC, METRICS_PATH, state_label
from tests.integration.conftest import send_request
from tests.integration.serve_process import serving
from tests.promql import Names, names

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "a2a-grpc.json"
RULES = ROOT / "deploy" / "prometheus" / "a2a-grpc-rules.yaml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "a2a-grpc-rules.test.yaml"
TARGET_LABELS = frozenset({"job", "instance"})
"""Labels Prometheus adds to every series it scrapes (the target's), never the server's."""
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
"""Grafana's built-in variables in range positions, as a query would be sent."""
LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.+),\s*(?P<label>\w+)\)$")
KNOWN_VALUES = {
    "code": {code.name for code in grpc.StatusCode},
    "method": {method.name for method in a2a_pb2.DESCRIPTOR.services_by_name["A2AService"].methods}
    | {INVALID_REQUEST_RPC},
    "state": {state_label(state) for state in a2a_pb2.TaskState.values()},
}
"""Every value a label can take, where the code can say so (a scrape shows only those seen)."""
METADATA = (("a2a-version", "1.0"),)


def dashboard_queries() -> list[str]:
    """Every PromQL query of the dashboard: each panel's targets (rows' panels too), and the
    selectors of its `label_values(...)` variables; Grafana's variables substituted."""
    board = json.loads(DASHBOARD.read_text())

    def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    queries = [
        target["expr"] for panel in panels(board["panels"]) for target in panel.get("targets", [])
    ]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            query = LABEL_VALUES.match(variable["query"]["query"])
            assert query is not None, variable
            queries.append(query["selector"])
    for name, value in GRAFANA_VARIABLES.items():
        queries = [query.replace(name, value) for query in queries]
    return queries


def variable_labels() -> set[str]:
    """The labels the dashboard's variables list the values of."""
    board = json.loads(DASHBOARD.read_text())
    return {
        match["label"]
        for variable in board["templating"]["list"]
        if variable["type"] == "query"
        for match in [LABEL_VALUES.match(variable["query"]["query"])]
        if match is not None
    }


def rule_expressions() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule["expr"] for group in groups for rule in group["rules"]]


@dataclass
class Exported:
    """What one scrape shows: each sample name's label names, and each label's values."""

    labels: dict[str, set[str]]
    values: dict[str, set[str]]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Exported:
    """A server with every optional part on (the audit trail; webhooks, which the demo card
    offers; the in-memory store, which counts tasks by state and bytes), scraped after calls
    that complete a task, fail one, leave one waiting for input and fail outright."""
    audit = tmp_path_factory.mktemp("pack") / "audit.jsonl"
    with serving("--port", "0", "--http-port", "0", "--audit-log", str(audit)) as served:
        with grpc.insecure_channel(f"{served.host}:{served.port}") as channel:
            a2a = a2a_pb2_grpc.A2AServiceStub(channel)
            for text, state in (
                ("hello", a2a_pb2.TASK_STATE_COMPLETED),
                ("fail", a2a_pb2.TASK_STATE_FAILED),
                ("ask", a2a_pb2.TASK_STATE_INPUT_REQUIRED),
            ):
                answer = a2a.SendMessage(send_request(text), metadata=METADATA)
                assert answer.task.status.state == state
            with pytest.raises(grpc.RpcError) as missing:
                a2a.GetTask(a2a_pb2.GetTaskRequest(id="no-such-task"), metadata=METADATA)
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND
        assert served.http_base is not None
        with urllib.request.urlopen(served.http_base + METRICS_PATH, timeout=10) as response:
            text = response.read().decode()
    labels: dict[str, set[str]] = defaultdict(set)
    values: dict[str, set[str]] = defaultdict(set)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels[sample.name] |= set(sample.labels)
            for label, value in sample.labels.items():
                values[label].add(value)
    return Exported(dict(labels), dict(values))


def problems(expr: str, exported: Exported) -> list[str]:
    """What `expr` names that the server does not export."""
    named: Names = names(expr)
    found = []
    labels_here = set(TARGET_LABELS)
    for selector in named.selectors:
        if selector.name is None or selector.name not in exported.labels:
            found.append(f"no metric {selector.name!r}")
            continue
        known = exported.labels[selector.name]
        labels_here |= known
        for label, op, value in selector.matchers:
            if label in TARGET_LABELS:
                continue
            if label not in known:
                found.append(f"{selector.name} has no label {label!r}")
                continue
            found.extend(_value_problems(selector.name, label, op, value, exported))
    found.extend(
        f"groups by {label!r}, which no metric here has" for label in named.grouping - labels_here
    )
    return found


def _value_problems(metric: str, label: str, op: str, value: str, exported: Exported) -> list[str]:
    possible = exported.values.get(label, set()) | KNOWN_VALUES.get(label, set())
    if op in ("=", "!="):
        alternatives = [value]
    elif re.fullmatch(r"[\w()]+(\|[\w()]+)*", value):
        alternatives = value.split("|")
    elif value in (".*", ".+"):
        return []
    else:
        return [f"{metric}{{{label}{op}{value!r}}}: a regular expression this check cannot read"]
    return [
        f"{metric}{{{label}{op}{value!r}}}: {label} is never {alternative!r}"
        for alternative in alternatives
        if alternative not in possible
    ]


@pytest.mark.parametrize(
    "expr",
    [*dashboard_queries(), *rule_expressions()],
    ids=lambda expr: " ".join(expr.split())[:60],
)
def test_every_name_the_pack_uses_is_exported(expr: str, exported: Exported) -> None:
    assert problems(expr, exported) == []


def test_the_check_finds_what_is_not_exported(exported: Exported) -> None:
    assert problems('a2a_rpc_requests_total{code="OKAY", shard="1"}', exported) == [
        "a2a_rpc_requests_total{code='OKAY'}: code is never 'OKAY'",
        "a2a_rpc_requests_total has no label 'shard'",
    ]
    assert problems("sum by (pod) (a2a_request_total)", exported) == [
        "no metric 'a2a_request_total'",
        "groups by 'pod', which no metric here has",
    ]
    assert problems('a2a_tasks{state=~"working|stuck"}', exported) == [
        "a2a_tasks{state=~'working|stuck'}: state is never 'stuck'"
    ]


def test_every_exported_metric_has_a_panel(exported: Exported) -> None:
    shown = {selector.name for query in dashboard_queries() for selector in names(query).selectors}
    histogram = re.compile(r"_(bucket|sum|count)$")  # one panel shows a histogram's series

    def series_of(name: str) -> set[str]:
        base = histogram.sub("", name)
        return {name} if base == name else {f"{base}_{part}" for part in ("bucket", "sum", "count")}

    unshown = {name for name in exported.labels if not series_of(name) & shown}
    assert unshown == set()
    assert variable_labels() <= TARGET_LABELS


def test_the_dashboard_is_well_formed() -> None:
    board = json.loads(DASHBOARD.read_text())
    assert board["uid"] and board["title"] == "a2a-grpc"
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        area = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not area & cells, f"{panel['title']} overlaps another panel"
        cells |= area
        if panel["type"] != "row":
            assert panel["description"], panel["title"]
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert panel["targets"], panel["title"]


@pytest.fixture
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        reason = "promtool is not installed (Debian: apt-get install prometheus)"
        if os.environ.get("A2A_GRPC_REQUIRE_PROMTOOL") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=cwd)


def test_promtool_checks_the_rules(promtool: str) -> None:
    checked = run(promtool, "check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rule_expressions())} rules found" in checked.stdout


def test_the_alerts_fire_when_they_should_and_only_then(promtool: str) -> None:
    tested = run(promtool, "test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    alerts = {
        rule["alert"]
        for group in yaml.safe_load(RULES.read_text())["groups"]
        for rule in group["rules"]
    }
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    fired = {
        case["alertname"]
        for test in tests
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    assert fired == alerts, "every alert has a unit test in which it fires"


def test_promtool_parses_every_dashboard_query(promtool: str, tmp_path: Path) -> None:
    # Each query as a recording rule: `promtool check rules` parses every expression.
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"a2a_dashboard:query_{n}", "expr": query}
                    for n, query in enumerate(dashboard_queries())
                ],
            }
        ]
    }
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    checked = run(promtool, "check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
