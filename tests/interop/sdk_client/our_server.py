"""Runs our server in its own process for the SDK-client interop tests.

Usage: python our_server.py [--strict | --secure | --unconfigured | --no-compat-03 | --oauth2]
[--card-v03-fields].
Prints
`PORT <n> HTTP <m>` (the gRPC port, and the HTTP port of the card and the JSON-RPC and HTTP+JSON
bindings) once serving and stops on SIGTERM.
- `--strict`: a card that accepts only text/plain, requires the extension urn:x-required and
  offers no push notifications.
- `--secure`: requires the bearer token `sdk-token`, offers an extended card, lets webhooks
  target loopback, and turns on this project's own features (signed messages offered but
  optional, the budget extension, the audit trail, tracing context).
- `--unconfigured`: offers an extended card without having one (bearer token `sdk-token`).
- `--no-compat-03`: does not serve A2A 0.3 callers (`serve --no-compat-03`).
- `--oauth2`: a card that declares OAuth2 schemes with 1.0-only parts (a device-code flow,
  `pkceRequired`) and a flow without scopes (declared only: the server does not check OAuth2).
- `--card-v03-fields`, with any of the above: the HTTP card also carries A2A 0.3's fields
  (`serve --card-v03-fields`).
"""

from __future__ import annotations

import asyncio
import signal
import sys
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ed25519

from a2a_grpc.core.jose import KeySet
from a2a_grpc.server.app import ServerPlan, start_server
from a2a_grpc.server.card import demo_card
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.demo_agent import DemoAgent

REQUIRED_EXTENSION = "urn:x-required"


async def main(mode: str, *, v03_fields: bool = False) -> None:
    card = extended = tokens = keys = None
    audit = None
    if mode == "--strict":
        card = demo_card("127.0.0.1:0")
        del card.default_input_modes[:]
        card.default_input_modes.append("text/plain")
        card.capabilities.extensions.add(uri=REQUIRED_EXTENSION, required=True)
        card.capabilities.push_notifications = False
    elif mode == "--unconfigured":
        card = demo_card("127.0.0.1:0")
        card.capabilities.extended_agent_card = True  # offered, but no extended card given
        tokens = {"sdk-token": "sdk-user"}
    elif mode == "--secure":
        card = demo_card("127.0.0.1:0")
        card.capabilities.extended_agent_card = True
        extended = demo_card("127.0.0.1:0")
        extended.skills.add(id="members", name="Members", description="extra", tags=["x"])
        tokens = {"sdk-token": "sdk-user"}
        keys = KeySet.of_private_keys({"k1": ed25519.Ed25519PrivateKey.generate()})
        audit = str(Path(tempfile.mkdtemp()) / "audit.jsonl")
    elif mode == "--oauth2":
        card = demo_card("127.0.0.1:0")
        schemes = card.security_schemes
        code = schemes["oauth"].oauth2_security_scheme.flows.authorization_code
        code.authorization_url = "https://idp.example/authorize"
        code.token_url = "https://idp.example/token"
        code.pkce_required = True
        code.scopes["tasks"] = "read and write tasks"
        device = schemes["device"].oauth2_security_scheme.flows.device_code
        device.device_authorization_url = "https://idp.example/device"
        device.token_url = "https://idp.example/token"
        service = schemes["service"].oauth2_security_scheme.flows.client_credentials
        service.token_url = "https://idp.example/token"  # and no scopes
        card.security_requirements.add().schemes["oauth"].list.append("tasks")
    config = ServerConfig(
        port=0,
        shutdown_grace=0.5,
        drain_delay=0,
        allow_private_webhooks=mode == "--secure",
        audit_log=audit,
        http_port=0,
        compat_03=mode != "--no-compat-03",
        card_v03_fields=v03_fields,
    )
    running = await start_server(
        ServerPlan(
            config, DemoAgent(), card, extended_card=extended, tokens=tokens, signature_keys=keys
        )
    )
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    assert running.http_server is not None
    print(f"PORT {running.port} HTTP {running.http_server.port}", flush=True)
    await stop.wait()
    await running.stop()


if __name__ == "__main__":
    flags = sys.argv[1:]
    modes = [flag for flag in flags if flag != "--card-v03-fields"]
    asyncio.run(main(modes[0] if modes else "", v03_fields="--card-v03-fields" in flags))
