"""The signed-messages extension end to end over a real channel, and the signed agent card."""

from __future__ import annotations

import time
from collections.abc import Callable

import grpc
import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from a2a_grpc.client import A2AClient, CardResolver
from a2a_grpc.client.errors import AgentCardError
from a2a_grpc.client.messages import user_message
from a2a_grpc.client.signing import MessageSigner
from a2a_grpc.core.errors import InvalidParamsError
from a2a_grpc.core.jose import KeySet
from a2a_grpc.core.signing import SIGNED_MESSAGE_EXTENSION, sign_message
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, TaskEvents
from tests.integration.conftest import Factory, Harness, error_reason, send_request

ALICE_KEY = ed25519.Ed25519PrivateKey.generate()
BOB_KEY = ec.generate_private_key(ec.SECP256R1())
KEYS = KeySet.of_private_keys({"alice-1": ALICE_KEY, "bob-1": BOB_KEY})
EXT = (("a2a-version", "1.0"), ("a2a-extensions", SIGNED_MESSAGE_EXTENSION))


class Recorder:
    def __init__(self) -> None:
        self.signers: list[str] = []

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        self.signers.append(context.signed_by)
        await events.complete()


@pytest.fixture
async def strict(make_server: Factory) -> tuple[Harness, Recorder]:
    agent = Recorder()
    harness = await make_server(agent=agent, signature_keys=KEYS, require_signed_messages=True)
    return harness, agent


def signed(text: str = "hello", *, key: object = ALICE_KEY, kid: str = "alice-1", **kw: object):  # type: ignore[no-untyped-def]
    request = send_request(text, tenant=str(kw.pop("tenant", "")))
    request.message.CopyFrom(
        sign_message(
            request.message, key, kid, tenant=str(kw.pop("sign_tenant", request.tenant)), **kw
        )  # type: ignore[arg-type]
    )
    return request


async def test_card_offers_the_extension_as_required(strict: tuple[Harness, Recorder]) -> None:
    harness, _ = strict
    (ext,) = [
        e
        for e in harness.running.handler.card.capabilities.extensions
        if e.uri == SIGNED_MESSAGE_EXTENSION
    ]
    assert ext.required


async def test_signed_messages_are_accepted_and_the_signer_reaches_the_agent(
    strict: tuple[Harness, Recorder],
) -> None:
    harness, agent = strict
    for key, kid in ((ALICE_KEY, "alice-1"), (BOB_KEY, "bob-1")):
        task = (await harness.stub.SendMessage(signed(key=key, kid=kid), metadata=EXT)).task
        assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert agent.signers == ["alice-1", "bob-1"]


async def test_our_client_signs_with_a_signer(strict: tuple[Harness, Recorder]) -> None:
    harness, agent = strict
    signer = MessageSigner(ALICE_KEY, "alice-1")
    async with A2AClient.connect(harness.running.address, signer=signer) as client:
        task = await client.send_message(user_message("hi"))
        assert isinstance(task, a2a_pb2.Task)
        events = [e async for e, _ in client.send_streaming_message(user_message("streamed"))]
        assert events
    assert agent.signers == ["alice-1", "alice-1"]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda r: r.message.parts[0].__setattr__("text", "tampered"), "signature"),
        (lambda r: r.message.parts.add(text="appended"), "signature"),
        (lambda r: r.__setattr__("tenant", "other"), "tenant"),
    ],
)
async def test_altered_messages_are_rejected_before_any_task(
    strict: tuple[Harness, Recorder],
    mutate: Callable[[a2a_pb2.SendMessageRequest], object],
    expected: str,
) -> None:
    harness, agent = strict
    request = signed()
    mutate(request)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await harness.stub.SendMessage(request, metadata=EXT)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_reason(caught.value) == "INVALID_PARAMS"
    assert expected in (caught.value.details() or "")
    assert agent.signers == [] and len(harness.store) == 0


async def test_unknown_key_expired_and_missing_signatures_are_rejected(
    strict: tuple[Harness, Recorder],
) -> None:
    harness, agent = strict
    stranger = ed25519.Ed25519PrivateKey.generate()
    cases = {
        "unknown": signed(key=stranger, kid="mallory-1"),
        "expired": signed(now=time.time() - 3600, ttl=60),
        "wrong tenant": signed(tenant="acme", sign_tenant="globex"),
        "only accepts signed": send_request("unsigned"),
    }
    for words, request in cases.items():
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await harness.stub.SendMessage(request, metadata=EXT)
        assert error_reason(caught.value) == "INVALID_PARAMS", words
        assert words.split()[-1] in (caught.value.details() or ""), words
    assert agent.signers == []


async def test_optional_extension_accepts_unsigned_but_not_bad_signatures(
    make_server: Factory,
) -> None:
    agent = Recorder()
    harness = await make_server(agent=agent, signature_keys=KEYS)
    await harness.stub.SendMessage(send_request("unsigned"))  # a peer knowing nothing of it
    bad = signed()
    bad.message.parts[0].text = "tampered"
    with pytest.raises(grpc.aio.AioRpcError):
        await harness.stub.SendMessage(bad)
    assert agent.signers == [""]


@pytest.mark.parametrize("v03_fields", [False, True], ids=["1.0", "with 0.3 fields"])
async def test_the_served_card_is_signed_and_verified_by_the_resolver(
    make_server: Factory, v03_fields: bool
) -> None:
    harness = await make_server(
        http_port=0, card_signer=(ALICE_KEY, "alice-1"), card_v03_fields=v03_fields
    )
    url = harness.running.card_url
    assert url is not None
    async with CardResolver(keyset=KEYS) as resolver:
        card = await resolver.get(url)
    assert card.signatures
    wrong = KeySet.of_private_keys({"alice-1": ed25519.Ed25519PrivateKey.generate()})
    async with CardResolver(keyset=wrong) as resolver:
        with pytest.raises(AgentCardError, match="signature"):
            await resolver.get(url)
    async with httpx.AsyncClient() as http:
        document = (await http.get(url)).json()
    assert document["signatures"][0]["protected"]
    # With --card-v03-fields the document carries A2A 0.3's fields too, and the resolver (a 1.0
    # reader) still verifies it.
    assert ("url" in document and document["protocolVersion"] == "0.3") is v03_fields


async def test_client_surfaces_the_refusal(strict: tuple[Harness, Recorder]) -> None:
    harness, _ = strict
    async with A2AClient.connect(harness.running.address) as client:  # no signer
        with pytest.raises(InvalidParamsError, match="only accepts signed"):
            await client.send_message(
                user_message("x"), metadata=(("a2a-extensions", SIGNED_MESSAGE_EXTENSION),)
            )
