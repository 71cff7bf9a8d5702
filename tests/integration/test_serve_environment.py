"""A real `a2a-grpc serve` configured by its environment alone (server/environment.py): the
settings are in force (its start-up lines, and calls over a real channel), the command line
wins, secrets come from files, and a bad variable stops the start naming it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import grpc
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from jwt.algorithms import OKPAlgorithm

from a2a_grpc.core import exit_codes
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from tests.integration.conftest import send_request
from tests.integration.serve_process import Served, run_serve, serving
from tests.redis_servers import RedisServerFactory

ISSUER = "https://issuer.example"
AUDIENCE = "a2a://billing"
METADATA = (("a2a-version", "1.0"),)


def settings(served: Served) -> dict[str, str]:
    """The settings line's `name=value` pairs (values as the line prints them)."""
    line = served.lines[-1].removeprefix("a2a-grpc: settings ")
    pairs: dict[str, str] = {}
    for part in line.split(", "):
        name, sep, value = part.partition("=")
        if sep and name.isidentifier():
            pairs[name] = value
        else:  # a tuple's items are separated by ", " too
            pairs[list(pairs)[-1]] += ", " + part
    return pairs


def stub(served: Served) -> tuple[grpc.Channel, a2a_pb2_grpc.A2AServiceStub]:
    channel = grpc.insecure_channel(f"{served.host}:{served.port}")
    return channel, a2a_pb2_grpc.A2AServiceStub(channel)


def test_settings_from_the_environment_alone_are_in_force(tmp_path: Path) -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    jwk = {**OKPAlgorithm.to_jwk(key.public_key(), as_dict=True), "kid": "k1", "alg": "EdDSA"}
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [jwk]}))
    audience = tmp_path / "audience"  # as a mounted Secret's key: a trailing newline
    audience.write_text(AUDIENCE + "\n")
    inline = tmp_path / "inline"
    inline.write_text("2048")
    environ = {
        "A2A_GRPC_PORT": "0",
        "A2A_GRPC_HTTP_PORT": "-1",
        "A2A_GRPC_MAX_TASKS": "1234",
        "A2A_GRPC_TASK_TTL": "60",
        "A2A_GRPC_COMPAT_03": "false",
        "A2A_GRPC_MAX_MESSAGE_BYTES": "4096",
        "A2A_GRPC_MAX_INLINE_BYTES_FILE": str(inline),
        "A2A_GRPC_JWKS": str(jwks),
        "A2A_GRPC_JWT_ISSUER": ISSUER,
        "A2A_GRPC_JWT_AUDIENCE_FILE": str(audience),
        "A2A_GRPC_DRAIN_DELAY": "0",
        "A2A_GRPC_MAX_TASK": "5",  # a typo: warned about, not read
    }
    with serving(env=environ, no_drain_delay=False) as served:  # not one option
        assert served.lines[-2] == (
            "a2a-grpc: options set by the environment: A2A_GRPC_COMPAT_03, A2A_GRPC_DRAIN_DELAY, "
            "A2A_GRPC_HTTP_PORT, A2A_GRPC_JWKS, A2A_GRPC_JWT_AUDIENCE_FILE, A2A_GRPC_JWT_ISSUER, "
            "A2A_GRPC_MAX_INLINE_BYTES_FILE, A2A_GRPC_MAX_MESSAGE_BYTES, A2A_GRPC_MAX_TASKS, "
            "A2A_GRPC_PORT, A2A_GRPC_TASK_TTL"
        )
        in_force = settings(served)
        assert in_force["max_tasks"] == "1234"
        assert in_force["max_inline_bytes"] == "2048"
        assert in_force["task_ttl"] == "60.0"
        assert in_force["compat_03"] == "False"
        assert in_force["http_port"] == "None"
        assert in_force["jwt_audience"] == AUDIENCE
        assert in_force["jwt_issuer"] == ISSUER
        assert in_force["drain_delay"] == "0.0"
        assert served.port != 50051  # A2A_GRPC_PORT=0: any free port
        assert served.http_base is None

        channel, a2a = stub(served)
        with channel:
            with pytest.raises(grpc.RpcError) as refused:
                a2a.SendMessage(send_request("hello"), metadata=METADATA)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            now = int(time.time())
            token = jwt.encode(
                {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "iat": now, "exp": now + 300},
                key,
                algorithm="EdDSA",
                headers={"kid": "k1"},
            )
            signed_in = (*METADATA, ("authorization", f"Bearer {token}"))
            answer = a2a.SendMessage(send_request("hello"), metadata=signed_in)
            assert answer.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
            with pytest.raises(grpc.RpcError) as too_big:  # A2A_GRPC_MAX_MESSAGE_BYTES
                a2a.SendMessage(send_request("x" * 5000), metadata=signed_in)
            assert too_big.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            with pytest.raises(grpc.RpcError) as no_v03:  # A2A_GRPC_COMPAT_03=false
                channel.unary_unary("/a2a.v1.A2AService/GetTask")(b"", metadata=signed_in)
            assert no_v03.value.code() == grpc.StatusCode.UNIMPLEMENTED
    unread = [line for line in served.stderr.splitlines() if "A2A_GRPC_MAX_TASK " in line]
    assert len(unread) == 1, served.stderr
    assert "did you mean A2A_GRPC_MAX_TASKS?" in unread[0]


def test_the_store_url_and_its_password_from_a_file(
    make_redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    password = "s3cret-in-a-file"
    redis = make_redis_server(extra_args=["--requirepass", password])
    secret = tmp_path / "store-url"
    secret.write_text(f"redis://:{password}@127.0.0.1:{redis.port}/0\n")
    environ = {
        "A2A_GRPC_STORE_FILE": str(secret),
        "A2A_GRPC_PORT": "50051",  # the flag --port 0 wins
        "A2A_GRPC_DRAIN_DELAY": "7",  # `serving` gives --drain-delay 0, which wins too
    }
    with serving("--port", "0", env=environ) as served:
        assert settings(served)["store"] == f"redis://:***@127.0.0.1:{redis.port}/0"
        assert settings(served)["drain_delay"] == "0.0"
        assert served.port != 50051
        assert served.lines[-2] == "a2a-grpc: options set by the environment: A2A_GRPC_STORE_FILE"
        channel, a2a = stub(served)
        with channel:
            task = a2a.SendMessage(send_request("kept in Redis"), metadata=METADATA).task
            got = a2a.GetTask(a2a_pb2.GetTaskRequest(id=task.id), metadata=METADATA)
            assert got.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert password not in served.stderr and password not in "\n".join(served.lines)


@pytest.mark.parametrize(
    ("environ", "says"),
    [
        ({"A2A_GRPC_MAX_TASKS": "ten"}, "A2A_GRPC_MAX_TASKS: invalid int value: 'ten'"),
        (
            {"A2A_GRPC_TASK_LEASE": "0"},
            "task_lease must be more than 0 and at most 3600 seconds (set by A2A_GRPC_TASK_LEASE)",
        ),
    ],
)
def test_a_bad_variable_stops_the_start_naming_it(environ: dict[str, str], says: str) -> None:
    finished = run_serve("--port", "0", env=environ)
    assert finished.returncode == exit_codes.USAGE, finished.stderr
    assert finished.stderr.startswith("a2a-grpc serve: "), finished.stderr
    assert says in finished.stderr
    assert finished.stdout == ""  # nothing listened
