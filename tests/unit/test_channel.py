"""The channel factory: targets, the load-balancing policy, and a retry policy that covers
exactly the idempotent RPCs."""

from __future__ import annotations

import json
import re

import pytest

from a2a_grpc.client.channel import (
    ChannelOptions,
    ChannelTarget,
    TlsConfig,
    channel_arguments,
    channel_target,
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
    assert off["grpc.enable_retries"] == 0
    assert json.loads(off["grpc.service_config"]) == {"loadBalancingConfig": [{"pick_first": {}}]}


async def test_channels_open_and_close() -> None:
    for tls in (None, TlsConfig()):
        channel = create_channel("127.0.0.1:1", tls=tls)
        await channel.close()


def test_half_a_client_certificate_is_refused() -> None:
    with pytest.raises(ValueError):
        create_channel("127.0.0.1:1", tls=TlsConfig(client_certificate=b"cert"))


@pytest.mark.parametrize(
    ("text", "uri", "addresses"),
    [
        ("127.0.0.1:5001", "127.0.0.1:5001", ()),
        ("agent.internal:50051", "agent.internal:50051", ()),
        ("unix:/run/agent.sock", "unix:/run/agent.sock", ()),
        (
            "127.0.0.1:5001,127.0.0.1:5002",
            "ipv4:127.0.0.1:5001,127.0.0.1:5002",
            ("127.0.0.1:5001", "127.0.0.1:5002"),
        ),
        (" 10.0.0.1:1 , 10.0.0.2:65535 ", "ipv4:10.0.0.1:1,10.0.0.2:65535", None),
        ("[::1]:5001,[fd00:0::2]:5002", "ipv6:[::1]:5001,[fd00::2]:5002", None),
        ("ipv4:10.0.0.1:1,10.0.0.2:2", "ipv4:10.0.0.1:1,10.0.0.2:2", ("10.0.0.1:1", "10.0.0.2:2")),
        ("ipv4:10.0.0.1:1", "ipv4:10.0.0.1:1", ("10.0.0.1:1",)),
    ],
)
def test_targets_as_grpc_reads_them(text: str, uri: str, addresses: tuple[str, ...] | None) -> None:
    target = channel_target(text)
    assert target.uri == uri and not target.dns
    if addresses is not None:
        assert target.addresses == addresses


def test_default_policy_follows_the_target() -> None:
    assert channel_target("127.0.0.1:5001").default_lb_policy == "pick_first"
    assert channel_target("ipv4:10.0.0.1:1").default_lb_policy == "pick_first"
    assert channel_target("127.0.0.1:1,127.0.0.1:2").default_lb_policy == "round_robin"
    named = channel_target("dns:///agents.internal:50051")
    assert named == ChannelTarget("dns:///agents.internal:50051", dns=True)
    assert named.default_lb_policy == "round_robin"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("localhost:5001,localhost:5002", "'localhost:5001' in a list of targets is not an IP"),
        ("127.0.0.1:5001,agent.internal:5002", "dns:///agent.internal:5002"),
        ("127.0.0.1:5001,[::1]:5002", "mixes IPv4 and IPv6"),
        ("127.0.0.1:5001,,127.0.0.1:5002", "empty item"),
        ("127.0.0.1:5001,", "empty item"),
        ("127.0.0.1:5001,127.0.0.2", "'127.0.0.2' in a list of targets needs a port"),
        ("127.0.0.1:5001,127.0.0.2:0", "needs a port from 1 to 65535"),
        ("127.0.0.1:5001,127.0.0.2:70000", "needs a port from 1 to 65535"),
        ("[::1]:5001,::2:5002", "in brackets"),
        ("[127.0.0.1]:5001,[::1]:5002", "brackets are for IPv6"),
        ("dns:///a.internal:1,dns:///b.internal:1", "a dns: target names one host"),
    ],
)
def test_unusable_lists_are_refused_naming_the_problem(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        channel_target(text)


def test_the_policy_is_the_targets_default_unless_the_options_name_one() -> None:
    def policy(options: ChannelOptions, default: str) -> str:
        config = dict(channel_arguments(options, lb_policy=default))["grpc.service_config"]
        (entry,) = json.loads(config)["loadBalancingConfig"]
        (name,) = entry
        return str(name)

    assert policy(ChannelOptions(), "round_robin") == "round_robin"
    assert policy(ChannelOptions(), "pick_first") == "pick_first"
    assert policy(ChannelOptions(lb_policy="pick_first"), "round_robin") == "pick_first"
    assert policy(ChannelOptions(lb_policy="round_robin"), "pick_first") == "round_robin"
    # The retry policy is the same whichever balancer is chosen.
    balanced = service_config(lb_policy="round_robin")
    assert balanced["methodConfig"] == service_config()["methodConfig"]


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="lb_policy 'random' is not one of pick_first"):
        ChannelOptions(lb_policy="random")


async def test_tls_to_a_list_needs_the_name_to_check() -> None:
    with pytest.raises(ValueError, match="server_name_override"):
        create_channel("127.0.0.1:1,127.0.0.1:2", tls=TlsConfig())
    named = TlsConfig(server_name_override="agents.internal")
    channel = create_channel("127.0.0.1:1,127.0.0.1:2", tls=named)
    await channel.close()
    for target in ("127.0.0.1:1,127.0.0.1:2", "dns:///localhost:1"):
        channel = create_channel(target)
        await channel.close()
