"""The console's card page: the agent card, and the checks a person debugging an agent runs on
it, each with a verdict (`ok`, `warn`, `fail` or `info`) and what it found.

- strict parse: the card's JSON parsed as A2A 1.0's AgentCard with no unknown member tolerated
  (the client itself is lenient and ignores them; a 0.3 card is read through its translation);
- signature: the card's signatures (A2A 1.0 §8.4) verified against the keys the card publishes
  (`core.signing.card_signing_keys`: its signed-messages extension's JWKS);
- reachability: each interface this client speaks called once (GetTask of an id no agent
  has: any answer from the agent, a TaskNotFoundError included, means it is reachable);
- the interface the client picks (`select_interface`, with `--transport`'s narrowing);
- the raw JSON as served.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format

from a2a_grpc.cli.console.views import error_view, proto_json
from a2a_grpc.client.card import SUPPORTED_VERSIONS, TRANSPORT_NAMES, V03_BINDINGS, select_interface
from a2a_grpc.client.channel import ChannelOptions, TlsConfig
from a2a_grpc.client.client import A2AClient
from a2a_grpc.client.credentials import Credentials
from a2a_grpc.client.errors import A2AClientError, A2ATransportError, RpcFailedError
from a2a_grpc.client.transports.opening import open_transport
from a2a_grpc.core import v03_agents
from a2a_grpc.core.errors import StatusError
from a2a_grpc.core.jose import SignatureError
from a2a_grpc.core.metadata import major_minor
from a2a_grpc.core.signing import MissingSignatureError, card_signing_keys, verify_card
from a2a_grpc.generated import a2a_pb2

PROBE_TIMEOUT_S = 5.0
"""Seconds each interface's reachability call may take."""


@dataclass(frozen=True)
class Check:
    name: str
    verdict: str
    """`ok`, `warn`, `fail`, or `info` (nothing to judge)."""
    detail: str

    def json(self) -> dict[str, str]:
        return {"name": self.name, "verdict": self.verdict, "detail": self.detail}


def strict_parse(document: Any) -> Check:
    """The card's JSON as A2A 1.0 ProtoJSON, refusing unknown members."""
    name = "strict A2A 1.0 parse"
    if not isinstance(document, dict):
        return Check(name, "fail", f"a card is a JSON object, not {type(document).__name__}")
    if v03_agents.is_v03_card_json(document):
        return Check(
            name,
            "warn",
            "an A2A 0.3 card (url, preferredTransport, no supportedInterfaces): read through "
            "the client's 0.3 translation",
        )
    try:
        json_format.ParseDict(document, a2a_pb2.AgentCard())
    except (json_format.ParseError, ValueError, RecursionError) as error:
        return Check(name, "fail", str(error))
    return Check(name, "ok", "every member is A2A 1.0's AgentCard")


def signature_check(card: a2a_pb2.AgentCard, document: Any) -> Check:
    """The card's signatures verified against the keys the card itself publishes."""
    name = "signature"
    if not card.signatures:
        return Check(name, "info", "the card is not signed")
    try:
        keys = card_signing_keys(card)
    except SignatureError as error:
        return Check(
            name,
            "warn",
            f"{len(card.signatures)} signature(s), but no key to verify them with: {error}",
        )
    try:
        kid = verify_card(card, keys, document=document if isinstance(document, dict) else None)
    except MissingSignatureError as error:
        return Check(name, "info", str(error))
    except SignatureError as error:
        return Check(name, "fail", str(error))
    return Check(name, "ok", f"verified with the card's key {kid!r}")


def chosen_interface(card: a2a_pb2.AgentCard, transports: Sequence[str]) -> Check:
    name = "interface the client uses"
    try:
        chosen = select_interface(card, transports)
    except A2AClientError as error:
        return Check(name, "fail", str(error))
    return Check(
        name,
        "ok",
        f"{chosen.protocol_binding} {chosen.protocol_version} {chosen.url}"
        + (f" (tenant {chosen.tenant})" if chosen.tenant else ""),
    )


def speaks(interface: a2a_pb2.AgentInterface) -> bool:
    """Whether this client speaks the interface's binding and version."""
    binding = interface.protocol_binding.upper()
    version = major_minor(interface.protocol_version)
    if binding not in TRANSPORT_NAMES.values() or version not in SUPPORTED_VERSIONS:
        return False
    return version == SUPPORTED_VERSIONS[0] or binding in V03_BINDINGS


async def reachability(
    card: a2a_pb2.AgentCard,
    *,
    tls: TlsConfig | None,
    channel_options: ChannelOptions,
    credentials: Credentials | None,
) -> list[dict[str, Any]]:
    """One probe per interface, run together; each says whether the agent answered there."""
    probes = [
        _probe(interface, tls, channel_options, credentials)
        for interface in card.supported_interfaces
    ]
    return list(await asyncio.gather(*probes))


async def _probe(
    interface: a2a_pb2.AgentInterface,
    tls: TlsConfig | None,
    channel_options: ChannelOptions,
    credentials: Credentials | None,
) -> dict[str, Any]:
    result: dict[str, Any] = {"interface": proto_json(interface)}
    if not speaks(interface):
        result.update(verdict="info", detail="a binding or version this client does not speak")
        return result
    try:
        transport = open_transport(interface, tls=tls, channel_options=channel_options)
    except ValueError as error:
        result.update(verdict="fail", detail=f"cannot be opened: {error}")
        return result
    client = A2AClient(
        transport=transport,
        owns_transport=True,
        tenant=interface.tenant,
        credentials=credentials,
        target=interface.url,
    )
    probe_id = f"console-probe-{uuid.uuid4()}"
    try:
        await client.get_task(probe_id, timeout=PROBE_TIMEOUT_S)
    except StatusError as error:
        result.update(verdict="ok", detail=f"the agent answered ({type(error).__name__})")
    except RpcFailedError as error:
        result.update(
            verdict="warn", detail=f"something answered, but not as an A2A agent: {error}"
        )
    except A2ATransportError as error:
        result.update(verdict="fail", detail=f"not reachable: {error}", error=error_view(error))
    except A2AClientError as error:
        result.update(verdict="fail", detail=str(error), error=error_view(error))
    else:
        result.update(verdict="ok", detail="the agent answered")
    finally:
        await client.close()
    return result


def card_document(text: str) -> Any:
    """The served card's JSON (None when it is not JSON: the strict parse says why)."""
    try:
        return json.loads(text)
    except ValueError:
        return None
