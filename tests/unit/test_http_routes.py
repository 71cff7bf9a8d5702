"""The HTTP+JSON routes come from the proto's annotations, each also under `/{tenant}`."""

from __future__ import annotations

from a2a_grpc.server.transports.http.routes import http_routes

SPEC_ROUTES = {
    ("POST", "/message:send", "SendMessage"),
    ("POST", "/message:stream", "SendStreamingMessage"),
    ("GET", "/tasks/{id=*}", "GetTask"),
    ("GET", "/tasks", "ListTasks"),
    ("POST", "/tasks/{id=*}:cancel", "CancelTask"),
    ("GET", "/tasks/{id=*}:subscribe", "SubscribeToTask"),
    ("POST", "/tasks/{id=*}:subscribe", "SubscribeToTask"),  # the spec's prose says POST
    ("POST", "/tasks/{task_id=*}/pushNotificationConfigs", "CreateTaskPushNotificationConfig"),
    ("GET", "/tasks/{task_id=*}/pushNotificationConfigs/{id=*}", "GetTaskPushNotificationConfig"),
    ("GET", "/tasks/{task_id=*}/pushNotificationConfigs", "ListTaskPushNotificationConfigs"),
    ("GET", "/extendedAgentCard", "GetExtendedAgentCard"),
    (
        "DELETE",
        "/tasks/{task_id=*}/pushNotificationConfigs/{id=*}",
        "DeleteTaskPushNotificationConfig",
    ),
}


def test_routes_are_the_annotations_each_also_under_a_tenant() -> None:
    routes = {(r.verb, r.template, r.rpc) for r in http_routes()}
    tenant_routes = {(verb, "/{tenant}" + path, rpc) for verb, path, rpc in SPEC_ROUTES}
    assert routes == SPEC_ROUTES | tenant_routes


def test_path_variables_match_one_segment_and_fill_their_fields() -> None:
    cancel = next(r for r in http_routes() if r.template == "/{tenant}/tasks/{id=*}:cancel")
    assert cancel.path == "/{v0:[^/:]+}/tasks/{v1:[^/:]+}:cancel"
    assert cancel.fields == ("tenant", "id")
    assert cancel.body == "*"
