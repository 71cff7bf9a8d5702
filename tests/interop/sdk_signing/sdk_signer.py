"""The official a2a-sdk's side of the signing interop tests, run as a child process.

Reads one JSON request on stdin, writes one JSON answer on stdout. It imports the SDK and never
a2a_grpc: both register the same lf.a2a.v1 proto symbols, so they cannot share a process.

- Cards: the SDK's own `a2a.utils.signing` (`create_agent_card_signer`,
  `create_signature_verifier`), its canonical form and its JCS.
- Messages: the SDK has no signed messages (that extension is ours), so this is a second
  implementation of its contract (see a2a_grpc.core.signing) from the SDK's parts: the SDK's
  proto classes and ProtoJSON, the SDK's JCS (`a2a.utils._jcs`), and PyJWT's compact JWS
  directly, with PyJWT's own header serialization (`json.dumps`, not RFC 8785).

Requests: {"op": "sign_card" | "verify_card" | "sign_message" | "verify_message", ...}; an
answer is {"ok": true, ...} or {"ok": false, "error": "..."}.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import jwt
from a2a.types import a2a_pb2 as sdk
from a2a.utils import signing
from a2a.utils._jcs import canonicalize
from google.protobuf import json_format
from jwt import PyJWK, api_jws
from jwt.utils import base64url_encode

EXTENSION = "urn:a2a-grpc:signed-message:v1"
ALGORITHMS = ["EdDSA", "ES256"]


def _keys(jwks: dict[str, Any]) -> dict[str, PyJWK]:
    return {jwk["kid"]: PyJWK(jwk) for jwk in jwks["keys"]}


def _provider(jwks: dict[str, Any]) -> Any:
    """The SDK's key_provider: the key of a kid; unknown kids fail as PyJWT errors do, which the
    SDK's verifier counts as a signature that does not verify."""
    keys = _keys(jwks)

    def provide(kid: str | None, jku: str | None) -> PyJWK:
        if kid not in keys:
            raise jwt.PyJWKError(f"unknown kid {kid!r}")
        return keys[kid]

    return provide


def sign_card(request: dict[str, Any]) -> dict[str, Any]:
    card = json_format.ParseDict(request["card"], sdk.AgentCard())
    signer = signing.create_agent_card_signer(
        signing_key=request["pem"].encode(),
        protected_header={"kid": request["kid"], "alg": request["alg"], "typ": "JOSE"},
    )
    return {"ok": True, "card": json_format.MessageToDict(signer(card))}


def verify_card(request: dict[str, Any]) -> dict[str, Any]:
    card = json_format.ParseDict(request["card"], sdk.AgentCard())
    verifier = signing.create_signature_verifier(_provider(request["jwks"]), ALGORITHMS)
    try:
        verifier(card)
    except signing.SignatureVerificationError as error:
        return {"ok": False, "error": f"{type(error).__name__}: {error}"}
    return {"ok": True}


def _message_payload(message: sdk.Message) -> bytes:
    data = json_format.MessageToDict(message)
    metadata = data.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop(EXTENSION, None)
        if not metadata:
            del data["metadata"]
    return canonicalize(data).encode("utf-8")


def sign_message(request: dict[str, Any]) -> dict[str, Any]:
    message = json_format.ParseDict(request["message"], sdk.Message())
    if EXTENSION not in message.extensions:
        message.extensions.append(EXTENSION)
    header = {
        "kid": request["kid"],
        "typ": "JOSE",
        "iat": request["now"],
        "exp": request["now"] + request["ttl"],
        "a2a-tenant": request["tenant"],
    }
    token = api_jws.encode(
        _message_payload(message), request["pem"].encode(), algorithm=request["alg"], headers=header
    )
    protected, _, signature = token.split(".")
    message.metadata[EXTENSION] = {"jws": f"{protected}..{signature}"}
    return {"ok": True, "message": json_format.MessageToDict(message)}


def verify_message(request: dict[str, Any]) -> dict[str, Any]:
    keys = _keys(request["jwks"])
    message = json_format.ParseDict(request["message"], sdk.Message())
    protected, middle, signature = message.metadata[EXTENSION]["jws"].split(".")
    assert middle == "", "the payload is detached"
    payload = base64url_encode(_message_payload(message)).decode("ascii")
    token = f"{protected}.{payload}.{signature}"
    try:
        kid = api_jws.get_unverified_header(token)["kid"]
        verified = api_jws.decode_complete(token, keys[kid], algorithms=ALGORITHMS)
    except (jwt.PyJWTError, KeyError) as error:
        return {"ok": False, "error": f"{type(error).__name__}: {error}"}
    header = verified["header"]
    if not header["iat"] <= request["now"] < header["exp"]:
        return {"ok": False, "error": "outside the validity window"}
    if header["a2a-tenant"] != request["tenant"]:
        return {"ok": False, "error": "wrong tenant"}
    return {"ok": True, "kid": kid, "header": header}


OPERATIONS = {
    "sign_card": sign_card,
    "verify_card": verify_card,
    "sign_message": sign_message,
    "verify_message": verify_message,
}

if __name__ == "__main__":
    request = json.load(sys.stdin)
    json.dump(OPERATIONS[request["op"]](request), sys.stdout)
