"""The agent card this server describes itself with: one loaded from JSON, or one made from what
the agent's class declares (the demo agent's included)."""

from __future__ import annotations

import contextlib
import inspect
import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from a2a_grpc.core.budget import BUDGET_EXTENSION
from a2a_grpc.core.canonical import canonicalize, card_document
from a2a_grpc.core.errors import UnsupportedOperationError
from a2a_grpc.core.jose import KeySet, PrivateKey, sign_detached
from a2a_grpc.core.metadata import PROTOCOL_VERSION
from a2a_grpc.core.signing import SIGNED_MESSAGE_EXTENSION, publish_signing_keys
from a2a_grpc.core.v03 import PROTOCOL_VERSION as V03_VERSION
from a2a_grpc.core.v03 import agent_card_json, is_v03
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import Skill
from a2a_grpc.server.demo_agent import DemoAgent
from a2a_grpc.server.trust.auth import CardSecurity

DEFAULT_VERSION = "0.1.0"
DEFAULT_MODES = ("*/*",)


def agent_card(agent: object) -> a2a_pb2.AgentCard:
    """The card of `agent` run without `--card`, from what its class declares (server/agent.py,
    "Describing the agent"); no interface yet (`finalize_card` adds the served ones).
    ValueError naming the attribute when a declaration is unusable."""
    kind = type(agent)
    name = _text(agent, "name", kind.__name__)
    own_doc = kind.__dict__.get("__doc__")
    fallback = inspect.cleandoc(own_doc) if isinstance(own_doc, str) else ""
    description = _text(agent, "description", fallback or f"{name}, an A2A agent.")
    skills = getattr(agent, "skills", None)
    if skills is None:
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "agent"
        skills = [Skill(id=slug, name=name, description=description)]
    if isinstance(skills, str | bytes) or not isinstance(skills, Iterable):
        raise ValueError(f"`skills` must be a list of Skill, got {type(skills).__name__}")
    card = a2a_pb2.AgentCard(
        name=name,
        description=description,
        version=_text(agent, "version", DEFAULT_VERSION),
        capabilities=a2a_pb2.AgentCapabilities(
            streaming=True, push_notifications=True, extended_agent_card=False
        ),
        default_input_modes=_strings(agent, "input_modes", DEFAULT_MODES),
        default_output_modes=_strings(agent, "output_modes", DEFAULT_MODES),
    )
    for index, skill in enumerate(skills):
        if not isinstance(skill, Skill):
            raise ValueError(f"`skills[{index}]` must be a Skill, got {type(skill).__name__}")
        if not skill.id or any(skill.id == known.id for known in card.skills):
            raise ValueError(f"`skills[{index}]` needs an id of its own, got {skill.id!r}")
        where = f"skills[{index}]"
        card.skills.add(
            id=skill.id,
            name=skill.name or skill.id,
            description=skill.description or skill.name or skill.id,
            tags=_strings(skill, "tags", (skill.id,), where) or [skill.id],
            examples=_strings(skill, "examples", (), where),
        )
    if not card.skills:
        raise ValueError("`skills` is empty: declare at least one Skill, or leave it out")
    return card


def _text(owner: object, attribute: str, default: str) -> str:
    value = getattr(owner, attribute, None)
    if value is None:
        return default
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"`{attribute}` must be a non-empty str, got {type(value).__name__}")
    return value.strip()


def _strings(owner: object, attribute: str, default: Sequence[str], where: str = "") -> list[str]:
    value = getattr(owner, attribute, None)
    if value is None:
        return list(default)
    name = f"{where}.{attribute}" if where else attribute
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ValueError(f"`{name}` must be a list of str, got {type(value).__name__}")
    items = list(value)
    if not all(isinstance(item, str) and item for item in items):
        raise ValueError(f"`{name}` must hold only non-empty str")
    return items


def demo_card(address: str) -> a2a_pb2.AgentCard:
    """The card of the built-in demo agent, reachable over gRPC at `address` (host:port)."""
    card = agent_card(DemoAgent())
    card.supported_interfaces.append(build_grpc_interface(address))
    return card


def build_grpc_interface(address: str, tenant: str = "") -> a2a_pb2.AgentInterface:
    return a2a_pb2.AgentInterface(
        url=address, protocol_binding="GRPC", protocol_version=PROTOCOL_VERSION, tenant=tenant
    )


def load_card(path: str) -> a2a_pb2.AgentCard:
    """An AgentCard from a ProtoJSON file (camelCase or snake_case names); ValueError if invalid."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"cannot read the card file {path}: {exc}") from exc
    card = a2a_pb2.AgentCard()
    try:
        json_format.Parse(text, card)
    except json_format.ParseError as exc:
        raise ValueError(f"{path} is not a valid AgentCard: {exc}") from exc
    missing = [
        name
        for name, present in (
            ("name", card.name),
            ("description", card.description),
            ("version", card.version),
            ("skills", len(card.skills)),
            ("defaultInputModes", len(card.default_input_modes)),
            ("defaultOutputModes", len(card.default_output_modes)),
        )
        if not present
    ]
    if missing:
        raise ValueError(f"{path}: the card needs {', '.join(missing)}")
    return card


@dataclass(frozen=True)
class Serving:
    """What this server serves and enforces, for `finalize_card` to state on the card."""

    grpc_address: str
    """The gRPC interface's address (host:port) a card without interfaces gets."""
    http_url: str | None = None
    """The HTTP port's base URL (`http://host:port`); None: no HTTP port."""
    http_bindings: Collection[str] = ("JSONRPC", "HTTP+JSON")
    """The HTTP bindings served on it."""
    v03: bool = False
    """A2A 0.3 callers are served (over gRPC)."""
    security: CardSecurity = field(default_factory=CardSecurity)
    """What the configured authenticator states (`Authenticator.card_security`)."""
    signed_messages: bool | None = None
    """Not None: the server verifies message signatures; True: it requires them."""
    signing_keys: KeySet | None = None
    """The public keys this agent's own messages are signed with."""


def finalize_card(card: a2a_pb2.AgentCard, serving: Serving) -> a2a_pb2.AgentCard:
    """A copy of `card` that states what this server really does (`serving`):

    - interfaces: a card without any gets the gRPC one at `grpc_address`; with `http_url`, a
      card that lists no JSONRPC or no HTTP+JSON interface gets it (JSON-RPC at `http_url/`,
      HTTP+JSON routes under `http_url`), after the others, for each of `http_bindings`; an
      interface of an HTTP binding not served is dropped, so the card lists exactly the served
      ones. With `v03`, one A2A 0.3 gRPC interface is listed last, at the first gRPC
      interface's url (none when the card lists no gRPC interface); any other 0.3 interface is
      dropped (0.3 is served over gRPC only);
    - capabilities: unset ones become explicit (streaming on, push and extended card off), and
      the server enforces what the card says; `signed_messages` offers the signed-messages
      extension, `signing_keys` publishes its keys in that extension's entry (`params.jwks`);
      the budget extension is always offered;
    - security: the schemes `security` states are declared (merged into the card's entries of
      the same names), and its requirements are the card's unless the card lists its own.
    """
    final = a2a_pb2.AgentCard()
    final.CopyFrom(card)
    _interfaces(final, serving)
    _v03_interface(final, serving.v03)
    _capabilities(final, serving)
    _security(final, serving.security)
    return final


def _interfaces(card: a2a_pb2.AgentCard, serving: Serving) -> None:
    unserved = {"JSONRPC", "HTTP+JSON"}.difference(serving.http_bindings)
    if unserved:
        kept = [i for i in card.supported_interfaces if i.protocol_binding not in unserved]
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(kept)
    if not card.supported_interfaces:
        card.supported_interfaces.append(build_grpc_interface(serving.grpc_address))
    if serving.http_url is None:
        return
    bindings = {interface.protocol_binding for interface in card.supported_interfaces}
    tenant = card.supported_interfaces[0].tenant
    for binding, url in (("JSONRPC", serving.http_url + "/"), ("HTTP+JSON", serving.http_url)):
        if binding in serving.http_bindings and binding not in bindings:
            card.supported_interfaces.add(
                url=url, protocol_binding=binding, protocol_version=PROTOCOL_VERSION, tenant=tenant
            )


def _capabilities(card: a2a_pb2.AgentCard, serving: Serving) -> None:
    capabilities = card.capabilities
    if not capabilities.HasField("streaming"):
        capabilities.streaming = True
    if not capabilities.HasField("push_notifications"):
        capabilities.push_notifications = False
    if not capabilities.HasField("extended_agent_card"):
        capabilities.extended_agent_card = False
    declared = {ext.uri for ext in capabilities.extensions}
    if serving.signed_messages is not None and SIGNED_MESSAGE_EXTENSION not in declared:
        capabilities.extensions.add(
            uri=SIGNED_MESSAGE_EXTENSION,
            description="Messages carry a JWS (EdDSA or ES256) over their canonical form.",
            required=serving.signed_messages,
        )
    if serving.signing_keys is not None:
        verifies = serving.signed_messages is not None
        publish_signing_keys(card, serving.signing_keys, verifies=verifies, required=False)
    if BUDGET_EXTENSION not in declared:
        capabilities.extensions.add(
            uri=BUDGET_EXTENSION,
            description="Requests may state a budget; tasks report their cost.",
        )


def _security(card: a2a_pb2.AgentCard, security: CardSecurity) -> None:
    for name, scheme in security.schemes.items():
        card.security_schemes[name].MergeFrom(scheme)
    if card.security_requirements:
        return  # the card's own requirements stand
    for names in security.requirements:
        requirement = card.security_requirements.add()
        for name in names:
            requirement.schemes[name].SetInParent()


def _v03_interface(card: a2a_pb2.AgentCard, served: bool) -> None:
    """Drops the card's A2A 0.3 interfaces; when `served`, lists the one this server serves
    (at the card's gRPC url: a card that lists no gRPC interface gets none)."""
    kept = [i for i in card.supported_interfaces if not is_v03(i.protocol_version)]
    url = next((i.url for i in kept if i.protocol_binding == "GRPC"), None)
    if served and url is not None:
        kept.append(
            a2a_pb2.AgentInterface(url=url, protocol_binding="GRPC", protocol_version=V03_VERSION)
        )
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(kept)


def complete_extended_card(
    extended: a2a_pb2.AgentCard, public: a2a_pb2.AgentCard
) -> a2a_pb2.AgentCard:
    """The extended card as GetExtendedAgentCard returns it (spec decision §9.9).

    Clients replace their cached card with it (spec §8), so it must say how to reach and call
    this server as fully as the public card (`public`, already finalized) does:
    - interfaces and security requirements: the file's when it lists any, else the public card's;
      A2A 0.3 interfaces are always the public card's (the server states what it serves);
    - security schemes: the public card's, with the file's entries winning per name;
    - capabilities: the ones in force, which are the public card's (the server enforces those,
      whatever the extended file says), plus any extension only the file declares;
    - signatures: dropped, since they covered other content (the server re-signs when it signs
      its cards).
    Everything else (name, skills, ...) is the file's.
    """
    card = a2a_pb2.AgentCard()
    card.CopyFrom(extended)
    if not card.supported_interfaces:
        card.supported_interfaces.extend(public.supported_interfaces)
    else:
        kept = [i for i in card.supported_interfaces if not is_v03(i.protocol_version)]
        kept += [i for i in public.supported_interfaces if is_v03(i.protocol_version)]
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(kept)
    own_extensions = [
        ext
        for ext in extended.capabilities.extensions
        if all(ext.uri != known.uri for known in public.capabilities.extensions)
    ]
    card.capabilities.CopyFrom(public.capabilities)
    card.capabilities.extensions.extend(own_extensions)
    for name, scheme in public.security_schemes.items():
        if name not in extended.security_schemes:
            card.security_schemes[name].CopyFrom(scheme)
    if not card.security_requirements:
        card.security_requirements.extend(public.security_requirements)
    del card.signatures[:]
    return card


def to_json(
    card: a2a_pb2.AgentCard,
    *,
    v03: bool = False,
    signer: tuple[PrivateKey, str] | None = None,
) -> str:
    """The card as ProtoJSON (camelCase), as served at /.well-known/agent-card.json.

    Without `v03` it is a strict A2A 1.0 card: every member is one of 1.0's AgentCard (what
    `serve` serves unless `--card-v03-fields`), in the card form the signatures cover
    (`core.canonical.card_document`: REQUIRED fields present even when empty), so that the JCS
    of the document as served, without `signatures`, is exactly what they sign.

    With `v03` (`--card-v03-fields`) and a 0.3 interface on the card, the document also
    carries what a 0.3 client reads (`url`, `preferredTransport`, `protocolVersion`,
    `additionalInterfaces`, `security` and typed security schemes, see
    `core.v03.agent_card_json`) under every name the 1.0 card does not use, so that one
    document serves both: a lenient 1.0 client ignores unknown fields, a 0.3 client ignores
    1.0's. The official SDK serves its card the same way. The card's own signatures sign the
    1.0 card, as a 1.0 client parses it (dropping the 0.3 fields); with `signer` (the key and
    kid the card is signed with) one more signature, last, signs the document as served, for a
    verifier that checks the JCS of what it received.
    """
    document = card_document(card)
    if v03:
        # No 0.3 interface on the card (UnsupportedOperationError): nothing a 0.3 client could
        # call, and nothing added.
        with contextlib.suppress(UnsupportedOperationError):
            _merge(document, agent_card_json(card))
            if signer is not None:
                served = canonicalize({k: v for k, v in document.items() if k != "signatures"})
                protected, _, signature = sign_detached(served, *signer).partition("..")
                entry = {"protected": protected, "signature": signature}
                document.setdefault("signatures", []).append(entry)
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)


def _merge(into: dict[str, Any], extra: dict[str, Any]) -> None:
    """Adds `extra`'s fields that `into` lacks, into nested objects and, position by
    position, into the objects of lists both have (the skills); keeps every field of `into`."""
    for name, value in extra.items():
        present = into.get(name)
        if present is None:
            into[name] = value
        elif isinstance(present, dict) and isinstance(value, dict):
            _merge(present, value)
        elif isinstance(present, list) and isinstance(value, list):
            for mine, theirs in zip(present, value, strict=False):
                if isinstance(mine, dict) and isinstance(theirs, dict):
                    _merge(mine, theirs)
