"""The RPCs as the HTTP bindings route them, and the requests read from what a route is given.

`rpcs_of` names each RPC of A2AService with its request class and handler method (a JSON-RPC
method is the RPC's name); `http_routes` reads the HTTP+JSON routes from the `google.api.http`
annotations of `proto/a2a.proto` (each with its `/{tenant}` additional binding). The decoding
turns JSON-RPC params, or an HTTP+JSON route's body, query and path, into the request message,
with the unknown members left out of it (spec §5.7). server/transports/http/bindings.py serves
them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from google.api import annotations_pb2  # type: ignore[import-untyped]
from google.protobuf import descriptor, json_format, message_factory
from google.protobuf.message import Message

from a2a_grpc.core import protojson
from a2a_grpc.core.errors import InvalidParamsError, InvalidRequestError
from a2a_grpc.core.service import SERVICE
from a2a_grpc.server.protocol.call_context import CallContext

_SEGMENT = "[^/:]+"
"""What one `*` path segment matches: not `/`, and not `:` so `/tasks/{id}` leaves
`/tasks/{id}:cancel` to its own route."""


@dataclass(frozen=True)
class Rpc:
    """One RPC of the service as the HTTP bindings call it."""

    name: str
    request_class: type[Message]
    streaming: bool
    method: Callable[[Any, CallContext], Any]
    """The handler method (snake_case of the RPC name)."""


@dataclass(frozen=True)
class HttpRoute:
    """One HTTP+JSON route, from a google.api.http rule."""

    verb: str
    template: str
    """The proto's path template, e.g. `/{tenant}/tasks/{id=*}:cancel`."""
    path: str
    """The aiohttp path: each variable `v<n>` matches one segment."""
    fields: tuple[str, ...]
    """The request field each variable `v<n>` fills, in order."""
    body: str
    rpc: str


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def rpcs_of(handler: Any) -> dict[str, Rpc]:
    """Every RPC of A2AService with its request class and handler method, from the descriptor."""
    return {
        method.name: Rpc(
            method.name,
            message_factory.GetMessageClass(method.input_type),
            method.server_streaming,
            getattr(handler, _snake(method.name)),
        )
        for method in SERVICE.methods
    }


def http_routes() -> list[HttpRoute]:
    """The HTTP+JSON routes: every method's google.api.http rule and its additional bindings."""
    routes: list[HttpRoute] = []
    for method in SERVICE.methods:
        rule = method.GetOptions().Extensions[annotations_pb2.http]
        for binding in (rule, *rule.additional_bindings):
            verb = binding.WhichOneof("pattern")
            if verb is None or verb == "custom":
                continue
            routes.append(_route(verb.upper(), getattr(binding, verb), binding.body, method.name))
            if method.server_streaming and verb == "get":
                routes.append(_route("POST", getattr(binding, verb), binding.body, method.name))
    return routes


def _route(verb: str, template: str, body: str, rpc: str) -> HttpRoute:
    fields: list[str] = []

    def variable(match: re.Match[str]) -> str:
        field, _, pattern = match.group(1).partition("=")
        if pattern not in ("", "*"):
            raise ValueError(f"unsupported path pattern {match.group(0)} in {template}")
        fields.append(field)
        return f"{{v{len(fields) - 1}:{_SEGMENT}}}"

    path = re.sub(r"\{([^}]+)\}", variable, template)
    return HttpRoute(verb, template, path, tuple(fields), body, rpc)


# -- decoding -----------------------------------------------------------------------------


def request_from_json(
    value: dict[str, Any], request_class: type[Message], *, strict: bool
) -> tuple[Message, list[str]]:
    """The request, and the unknown members left out of it (spec §5.7; `strict`: refused)."""
    try:
        return protojson.parse(value, request_class, ignore_unknown=not strict)
    except (json_format.ParseError, TypeError, ValueError, RecursionError) as exc:
        raise InvalidParamsError(f"invalid {request_class.DESCRIPTOR.name}: {exc}") from None


def rest_request(
    route: HttpRoute,
    request_class: type[Message],
    http_request: web.Request,
    body: bytes,
    *,
    strict: bool,
) -> tuple[Message, list[str]]:
    """The request of an HTTP+JSON route, from its body (a body rule), or its query, and its
    path; with the unknown members left out of it. An empty body, or `null` (a2a-go sends
    that for CancelTask and a POST to `:subscribe`), is the empty request: the path fills it,
    and the handler says what is still missing."""
    if route.body == "*" and body.strip():
        try:
            value = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise InvalidRequestError(f"the body is not JSON: {exc}") from None
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise InvalidParamsError(
                f"the body must be a JSON object (a {request_class.DESCRIPTOR.name})"
            )
        message, ignored = request_from_json(value, request_class, strict=strict)
    else:
        query = _query_params(http_request, request_class, strict=strict)
        message, ignored = request_from_json(query, request_class, strict=strict)
    for index, field in enumerate(route.fields):
        value = http_request.match_info[f"v{index}"]
        present = getattr(message, field)
        if present and present != value:
            raise InvalidParamsError(
                f"{field} is {value!r} in the path but {present!r} in the body"
            )
        setattr(message, field, value)
    return message, ignored


def _query_params(
    http_request: web.Request, request_class: type[Message], *, strict: bool
) -> dict[str, Any]:
    """The query string as the ProtoJSON object it stands for: names in camelCase (or the
    proto's), repeated fields by repetition or commas, booleans as true/false. A parameter
    that names no field is kept as it came, for the parse to leave out and count (`strict`:
    refused here)."""
    fields = request_class.DESCRIPTOR.fields_by_name
    by_json = {field.json_name: field for field in request_class.DESCRIPTOR.fields}
    value: dict[str, Any] = {}
    for key in http_request.query:
        field = by_json.get(key) or fields.get(key)
        values = http_request.query.getall(key)
        if field is None:
            if strict:
                raise InvalidParamsError(
                    f"unknown query parameter {key!r} for {request_class.DESCRIPTOR.name}"
                )
            value[key] = values
            continue
        if field.is_repeated:
            value[field.json_name] = [item for v in values for item in v.split(",") if item]
            continue
        if len(values) > 1:
            raise InvalidParamsError(f"query parameter {key!r} is given more than once")
        text: Any = values[0]
        if field.type == descriptor.FieldDescriptor.TYPE_BOOL:
            if text not in ("true", "false"):
                raise InvalidParamsError(f"query parameter {key!r} must be true or false")
            text = text == "true"
        value[field.json_name] = text
    return value
