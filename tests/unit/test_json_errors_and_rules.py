"""What the HTTP client transports share with the server through core: the JSON error codec and
the HTTP+JSON rules read from the proto's annotations."""

from __future__ import annotations

import pytest

from a2a_grpc.core import status
from a2a_grpc.core.errors import (
    ERROR_BY_JSONRPC_CODE,
    ERROR_CLASSES,
    SERVICE_ERROR_CLASSES,
    FieldViolation,
    InvalidParamsError,
    ResourceExhaustedError,
    StatusError,
    TaskNotFoundError,
)
from a2a_grpc.core.http_routes import SERVICE, http_rules, request_path, request_rule
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.generated import a2a_v03_pb2 as old
from a2a_grpc.server.transports.http.routes import http_routes


@pytest.mark.parametrize("cls", [*ERROR_CLASSES, *SERVICE_ERROR_CLASSES], ids=lambda c: c.__name__)
def test_every_error_survives_the_json_details(cls: type[StatusError]) -> None:
    error = cls("said no", metadata={"taskId": "t1"})
    decoded = status.decode_json(status.message_of(error), status.details_json(error))
    assert type(decoded) is cls
    assert decoded.message == "said no" and decoded.metadata == {"taskId": "t1"}
    assert decoded.retryable == error.retryable


def test_json_details_keep_violations_and_retry_delay() -> None:
    invalid = InvalidParamsError(field_violations=[FieldViolation("message.parts", "empty")])
    decoded = status.decode_json(invalid.message, status.details_json(invalid))
    assert decoded is not None and decoded.field_violations == invalid.field_violations
    busy = ResourceExhaustedError(retry_delay=1.5)
    decoded = status.decode_json(busy.message, status.details_json(busy))
    assert isinstance(decoded, ResourceExhaustedError) and decoded.retry_delay == 1.5


@pytest.mark.parametrize(
    "details",
    [[], [{"@type": "type.googleapis.com/no.Such"}], ["text"], [{"reason": "TASK_NOT_FOUND"}]],
    ids=["none", "unknown-type", "not-an-object", "no-type"],
)
def test_json_details_without_a_known_error_info(details: list[object]) -> None:
    assert status.decode_json("x", details) is None


def test_every_a2a_error_has_its_own_jsonrpc_code() -> None:
    assert sorted(ERROR_BY_JSONRPC_CODE.values(), key=lambda c: c.__name__) == sorted(
        ERROR_CLASSES, key=lambda c: c.__name__
    )
    assert ERROR_BY_JSONRPC_CODE[-32001] is TaskNotFoundError


def test_the_client_rules_are_the_routes_the_server_serves() -> None:
    served = {(route.verb, route.template, route.rpc) for route in http_routes()}
    rules = {
        (rule.verb, rule.template, rule.rpc)
        for method in SERVICE.methods
        for rule in http_rules(method.name)
    }
    # The server also answers POST on the streaming GET (the spec's prose); the proto says GET.
    post_subscribe = {
        route for route in served if route[0] == "POST" and route[2] == "SubscribeToTask"
    }
    assert rules == served - post_subscribe


def test_a_request_with_a_tenant_takes_the_tenant_rule() -> None:
    plain = a2a_pb2.GetTaskRequest(id="t 1")
    rule = request_rule("GetTask", plain)
    assert (rule.verb, request_path(rule, plain)) == ("GET", "/tasks/t%201")
    tenanted = a2a_pb2.GetTaskRequest(id="t1", tenant="acme/eu")
    rule = request_rule("GetTask", tenanted)
    assert request_path(rule, tenanted) == "/acme%2Feu/tasks/t1"
    assert rule.fields == ("tenant", "id")


def test_a_request_missing_a_path_field_gets_the_first_rule() -> None:
    rule = request_rule("GetTask", a2a_pb2.GetTaskRequest())
    assert rule.template == "/tasks/{id=*}"


def test_0_3_rules_keep_resource_names_whole() -> None:
    service = old.DESCRIPTOR.services_by_name["A2AService"]
    get = old.GetTaskRequest(name="tasks/t1")
    assert request_path(request_rule("GetTask", get, service), get) == "/v1/tasks/t1"
    create = old.CreateTaskPushNotificationConfigRequest(parent="tasks/t1", config_id="p1")
    rule = request_rule("CreateTaskPushNotificationConfig", create, service)
    assert (rule.verb, rule.body) == ("POST", "config")
    assert request_path(rule, create) == "/v1/tasks/t1/pushNotificationConfigs"
