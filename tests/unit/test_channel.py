"""The channel factory's retry policy covers exactly the idempotent RPCs."""

from __future__ import annotations

import json

import pytest

from a2a_grpc.client.channel import (
    ChannelOptions,
    TlsConfig,
    channel_arguments,
    create_channel,
    service_config,
)
from a2a_grpc.generated import a2a_pb2


def test_retry_policy_is_for_idempotent_rpcs_on_unavailable_only() -> None:
    (method_config,) = service_config()["methodConfig"]
    names = {entry["method"] for entry in method_config["name"]}
    assert names == {
        "GetTask",
        "ListTasks",
        "SubscribeToTask",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "GetExtendedAgentCard",
        "DeleteTaskPushNotificationConfig",
    }
    service = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]
    assert names <= {m.name for m in service.methods}
    assert {e["service"] for e in method_config["name"]} == {service.full_name}
    assert method_config["retryPolicy"]["retryableStatusCodes"] == ["UNAVAILABLE"]


def test_arguments() -> None:
    args = dict(channel_arguments(ChannelOptions(max_receive_message_bytes=123)))
    assert args["grpc.max_receive_message_length"] == 123
    assert args["grpc.enable_retries"] == 1
    assert json.loads(args["grpc.service_config"]) == service_config()
    off = dict(channel_arguments(ChannelOptions(transport_retry_attempts=1)))
    assert off["grpc.enable_retries"] == 0 and "grpc.service_config" not in off


async def test_channels_open_and_close() -> None:
    for tls in (None, TlsConfig()):
        channel = create_channel("127.0.0.1:1", tls=tls)
        await channel.close()


def test_half_a_client_certificate_is_refused() -> None:
    with pytest.raises(ValueError):
        create_channel("127.0.0.1:1", tls=TlsConfig(client_certificate=b"cert"))
