"""The HTTP+JSON binding's routes, read from the proto's `google.api.http` annotations.

Each RPC has its rule (`POST /message:send`, `GET /tasks/{id=*}`, ...) and an additional binding
under `/{tenant}`. `request_path` fills a rule's template from a request, the way a client calls
it: the tenant rule when the request has a tenant, the plain one otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

from google.api import annotations_pb2  # type: ignore[import-untyped]
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message

from a2a_grpc.core.service import SERVICE

_VARIABLE = re.compile(r"\{([^}=]+)(?:=([^}]*))?\}")


@dataclass(frozen=True)
class HttpRule:
    """One `google.api.http` binding of an RPC."""

    rpc: str
    verb: str
    """Upper case: GET, POST, DELETE, ..."""
    template: str
    """The path template, e.g. `/{tenant}/tasks/{id=*}:cancel`."""
    body: str
    """`*` when the whole request is the body, "" when it travels in the path and query."""

    @property
    def fields(self) -> tuple[str, ...]:
        """The request fields the path names, in order."""
        return tuple(match.group(1) for match in _VARIABLE.finditer(self.template))


def http_rules(rpc: str, service: ServiceDescriptor = SERVICE) -> tuple[HttpRule, ...]:
    """The rule of `rpc` and its additional bindings, in the proto's order (KeyError for an
    RPC the service does not have). `service` is A2A 1.0's unless given (A2A 0.3's, say)."""
    rule = service.methods_by_name[rpc].GetOptions().Extensions[annotations_pb2.http]
    rules: list[HttpRule] = []
    for binding in (rule, *rule.additional_bindings):
        verb = binding.WhichOneof("pattern")
        if verb is None or verb == "custom":
            continue
        rules.append(HttpRule(rpc, verb.upper(), getattr(binding, verb), binding.body))
    return tuple(rules)


def request_rule(rpc: str, request: Message, service: ServiceDescriptor = SERVICE) -> HttpRule:
    """The rule a client uses for `request`: of the rules whose path fields the request all
    sets, the one naming the most (so a request with a tenant takes the `/{tenant}` binding);
    the first rule when none has all its fields (the server then says what is missing)."""
    rules = http_rules(rpc, service)
    usable = [rule for rule in rules if all(getattr(request, f) for f in rule.fields)]
    return max(usable, key=lambda rule: len(rule.fields)) if usable else rules[0]


def request_path(rule: HttpRule, request: Message) -> str:
    """`rule`'s path with the request's fields filled in. A plain variable is one segment,
    percent-encoded; one with a pattern (`{name=tasks/*}`) keeps the value's `/`, and gets the
    pattern's trailing literal segments the value lacks (0.3's
    `{parent=tasks/*/pushNotificationConfigs}` with `tasks/t1` is
    `tasks/t1/pushNotificationConfigs`)."""

    def value(match: re.Match[str]) -> str:
        text = str(getattr(request, match.group(1)))
        pattern = match.group(2)
        if pattern in (None, "*"):
            return quote(text, safe="")
        have = text.split("/")
        wanted = pattern.split("/")
        tail = wanted[len(have) :]
        if all("*" not in segment for segment in tail):
            have += tail
        return "/".join(quote(segment, safe="") for segment in have)

    return _VARIABLE.sub(value, rule.template)
