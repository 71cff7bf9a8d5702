"""Our lf.a2a.v1 contract is wire-identical to the one shipped in the official a2a-sdk."""

from __future__ import annotations

import subprocess
import sys

import pytest
from google.api import annotations_pb2, field_behavior_pb2
from google.protobuf import descriptor_pb2

from a2a_grpc.generated import a2a_pb2
from tests.unit.descriptor_diff import descriptor_differences

# The SDK registers the same symbols in the default descriptor pool, so its descriptor is read in
# a child process and handed over serialized.
_DUMP_SDK_DESCRIPTOR = """
import sys
from google.protobuf import descriptor_pb2
import a2a.types.a2a_pb2 as sdk
proto = descriptor_pb2.FileDescriptorProto()
sdk.DESCRIPTOR.CopyToProto(proto)
sys.stdout.buffer.write(proto.SerializeToString())
"""


@pytest.fixture(scope="module")
def reference() -> descriptor_pb2.FileDescriptorProto:
    out = subprocess.run(
        [sys.executable, "-c", _DUMP_SDK_DESCRIPTOR], check=True, capture_output=True, timeout=60
    ).stdout
    return descriptor_pb2.FileDescriptorProto.FromString(out)


@pytest.fixture
def ours() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto()
    a2a_pb2.DESCRIPTOR.CopyToProto(proto)
    return proto


def test_reference_is_the_a2a_1_0_contract(reference: descriptor_pb2.FileDescriptorProto) -> None:
    assert reference.package == "lf.a2a.v1"
    assert len(reference.message_type) == 44
    assert [m.name for m in reference.service[0].method][:2] == [
        "SendMessage",
        "SendStreamingMessage",
    ]
    assert len(reference.service[0].method) == 11


def test_our_descriptor_is_wire_identical(
    ours: descriptor_pb2.FileDescriptorProto, reference: descriptor_pb2.FileDescriptorProto
) -> None:
    assert descriptor_differences(ours, reference) == []


def test_a_changed_field_number_is_named(
    ours: descriptor_pb2.FileDescriptorProto, reference: descriptor_pb2.FileDescriptorProto
) -> None:
    task = next(m for m in ours.message_type if m.name == "Task")
    next(f for f in task.field if f.name == "context_id").number = 9
    assert descriptor_differences(ours, reference) == [
        "Task.context_id: number is 9, reference has 2"
    ]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda p: setattr(
                next(m for m in p.service[0].method if m.name == "SubscribeToTask"),
                "server_streaming",
                False,
            ),
            "rpc A2AService.SubscribeToTask: server_streaming is False, reference True",
        ),
        (
            lambda p: setattr(
                next(e for e in p.enum_type if e.name == "TaskState").value[5], "number", 55
            ),
            "TaskState.TASK_STATE_CANCELED: enum value 55 != reference 5",
        ),
        (
            lambda p: setattr(
                next(
                    f
                    for f in next(m for m in p.message_type if m.name == "GetTaskRequest").field
                    if f.name == "history_length"
                ),
                "proto3_optional",
                False,
            ),
            "GetTaskRequest.history_length: proto3_optional is False, reference has True",
        ),
        (
            lambda p: next(
                f
                for f in next(m for m in p.message_type if m.name == "Message").field
                if f.name == "parts"
            ).options.ClearExtension(field_behavior_pb2.field_behavior),
            "Message.parts: field_behavior is [], reference has [2]",
        ),
        (
            lambda p: setattr(
                next(m for m in p.service[0].method if m.name == "GetTask").options.Extensions[
                    annotations_pb2.http
                ],
                "get",
                "/task/{id=*}",
            ),
            "rpc A2AService.GetTask: http",
        ),
    ],
)
def test_other_differences_are_named(
    ours: descriptor_pb2.FileDescriptorProto,
    reference: descriptor_pb2.FileDescriptorProto,
    mutate: object,
    expected: str,
) -> None:
    mutate(ours)  # type: ignore[operator]
    assert any(diff.startswith(expected) for diff in descriptor_differences(ours, reference))
