"""Our a2a.v1 (A2A 0.3) contract is wire-identical to the one the official a2a-sdk ships for its
0.3 compatibility layer."""

from __future__ import annotations

import subprocess
import sys

import pytest
from google.protobuf import descriptor_pb2

from a2a_grpc.generated import a2a_v03_pb2
from tests.unit.descriptor_diff import descriptor_differences

# The SDK's 0.3 module registers the same a2a.v1 symbols in the default descriptor pool, so its
# descriptor is read in a child process and handed over serialized.
_DUMP_SDK_DESCRIPTOR = """
import sys
from google.protobuf import descriptor_pb2
import a2a.compat.v0_3.a2a_v0_3_pb2 as sdk
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
    a2a_v03_pb2.DESCRIPTOR.CopyToProto(proto)
    return proto


def test_reference_is_the_a2a_0_3_contract(reference: descriptor_pb2.FileDescriptorProto) -> None:
    assert reference.package == "a2a.v1"
    methods = [m.name for m in reference.service[0].method]
    assert "TaskSubscription" in methods
    assert "GetAgentCard" in methods
    assert "ListTasks" not in methods
    assert len(methods) == 10


def test_our_descriptor_is_wire_identical(
    ours: descriptor_pb2.FileDescriptorProto, reference: descriptor_pb2.FileDescriptorProto
) -> None:
    assert descriptor_differences(ours, reference) == []


def test_a_changed_artifact_number_is_named(
    ours: descriptor_pb2.FileDescriptorProto, reference: descriptor_pb2.FileDescriptorProto
) -> None:
    artifact = next(m for m in ours.message_type if m.name == "Artifact")
    next(f for f in artifact.field if f.name == "name").number = 2  # the 1.0 number
    assert descriptor_differences(ours, reference) == [
        "Artifact.name: number is 2, reference has 3"
    ]


def test_a_lost_json_name_is_named(
    ours: descriptor_pb2.FileDescriptorProto, reference: descriptor_pb2.FileDescriptorProto
) -> None:
    status = next(m for m in ours.message_type if m.name == "TaskStatus")
    next(f for f in status.field if f.name == "update").json_name = "update"
    assert descriptor_differences(ours, reference) == [
        "TaskStatus.update: json_name is 'update', reference has 'message'"
    ]
