"""Compares two FileDescriptorProtos on everything that reaches the wire or the HTTP mapping."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from google.api import annotations_pb2, client_pb2, field_behavior_pb2
from google.protobuf import descriptor_pb2

FieldDP = descriptor_pb2.FieldDescriptorProto


def _by_name(items: Iterable[Any]) -> dict[str, Any]:
    return {item.name: item for item in items}


def _default_json_name(name: str) -> str:
    """protoc's lowerCamelCase; used when a serialized descriptor leaves json_name out."""
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _field_shape(message: descriptor_pb2.DescriptorProto, field: FieldDP) -> dict[str, object]:
    oneof = ""
    if field.HasField("oneof_index") and not field.proto3_optional:
        oneof = message.oneof_decl[field.oneof_index].name
    return {
        "number": field.number,
        "type": FieldDP.Type.Name(field.type),
        "label": FieldDP.Label.Name(field.label),
        "type_name": field.type_name,
        "oneof": oneof,
        "proto3_optional": field.proto3_optional,
        "json_name": field.json_name or _default_json_name(field.name),
        "field_behavior": list(field.options.Extensions[field_behavior_pb2.field_behavior]),
        "deprecated": field.options.deprecated,
    }


def _message_diffs(
    path: str, ours: descriptor_pb2.DescriptorProto, theirs: descriptor_pb2.DescriptorProto
) -> list[str]:
    diffs: list[str] = []
    if ours.options.map_entry != theirs.options.map_entry:
        diffs.append(f"{path}: map_entry {ours.options.map_entry} != {theirs.options.map_entry}")
    our_fields, their_fields = _by_name(ours.field), _by_name(theirs.field)
    for name in sorted(our_fields.keys() | their_fields.keys()):
        if name not in their_fields:
            diffs.append(f"{path}.{name}: field only in ours")
        elif name not in our_fields:
            diffs.append(f"{path}.{name}: field missing from ours")
        else:
            a = _field_shape(ours, our_fields[name])
            b = _field_shape(theirs, their_fields[name])
            for key in a:
                if a[key] != b[key]:
                    diffs.append(f"{path}.{name}: {key} is {a[key]!r}, reference has {b[key]!r}")
    our_oneofs = sorted(o.name for o in ours.oneof_decl)
    their_oneofs = sorted(o.name for o in theirs.oneof_decl)
    if our_oneofs != their_oneofs:
        diffs.append(f"{path}: oneofs {our_oneofs} != {their_oneofs}")
    diffs += _nested_diffs(
        path, ours.nested_type, theirs.nested_type, ours.enum_type, theirs.enum_type
    )
    return diffs


def _enum_diffs(
    path: str, ours: descriptor_pb2.EnumDescriptorProto, theirs: descriptor_pb2.EnumDescriptorProto
) -> list[str]:
    a = {v.name: v.number for v in ours.value}
    b = {v.name: v.number for v in theirs.value}
    return [
        f"{path}.{name}: enum value {a.get(name)} != reference {b.get(name)}"
        for name in sorted(a.keys() | b.keys())
        if a.get(name) != b.get(name)
    ]


def _nested_diffs(
    path: str,
    our_messages: Iterable[descriptor_pb2.DescriptorProto],
    their_messages: Iterable[descriptor_pb2.DescriptorProto],
    our_enums: Iterable[descriptor_pb2.EnumDescriptorProto],
    their_enums: Iterable[descriptor_pb2.EnumDescriptorProto],
) -> list[str]:
    diffs: list[str] = []
    prefix = f"{path}." if path else ""
    a, b = _by_name(our_messages), _by_name(their_messages)
    for name in sorted(a.keys() | b.keys()):
        if name not in b:
            diffs.append(f"{prefix}{name}: message only in ours")
        elif name not in a:
            diffs.append(f"{prefix}{name}: message missing from ours")
        else:
            diffs += _message_diffs(prefix + name, a[name], b[name])
    ea, eb = _by_name(our_enums), _by_name(their_enums)
    for name in sorted(ea.keys() | eb.keys()):
        if name not in eb or name not in ea:
            diffs.append(f"{prefix}{name}: enum present on one side only")
        else:
            diffs += _enum_diffs(prefix + name, ea[name], eb[name])
    return diffs


def _method_shape(method: descriptor_pb2.MethodDescriptorProto) -> dict[str, object]:
    return {
        "input": method.input_type,
        "output": method.output_type,
        "client_streaming": method.client_streaming,
        "server_streaming": method.server_streaming,
        "http": method.options.Extensions[annotations_pb2.http].SerializeToString(
            deterministic=True
        ),
        "method_signature": list(method.options.Extensions[client_pb2.method_signature]),
    }


def descriptor_differences(
    ours: descriptor_pb2.FileDescriptorProto, theirs: descriptor_pb2.FileDescriptorProto
) -> list[str]:
    """Every wire-relevant difference between two proto files, each named; empty when identical."""
    diffs: list[str] = []
    if ours.package != theirs.package:
        diffs.append(f"package {ours.package!r} != reference {theirs.package!r}")
    if ours.syntax != theirs.syntax:
        diffs.append(f"syntax {ours.syntax!r} != reference {theirs.syntax!r}")
    diffs += _nested_diffs(
        "", ours.message_type, theirs.message_type, ours.enum_type, theirs.enum_type
    )
    services_a, services_b = _by_name(ours.service), _by_name(theirs.service)
    for sname in sorted(services_a.keys() | services_b.keys()):
        if sname not in services_a or sname not in services_b:
            diffs.append(f"service {sname}: present on one side only")
            continue
        ma, mb = _by_name(services_a[sname].method), _by_name(services_b[sname].method)
        for mname in sorted(ma.keys() | mb.keys()):
            if mname not in ma or mname not in mb:
                diffs.append(f"rpc {sname}.{mname}: present on one side only")
                continue
            a, b = _method_shape(ma[mname]), _method_shape(mb[mname])
            for key in a:
                if a[key] != b[key]:
                    diffs.append(f"rpc {sname}.{mname}: {key} is {a[key]!r}, reference {b[key]!r}")
    return diffs
