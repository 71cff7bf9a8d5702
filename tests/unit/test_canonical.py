"""RFC 8785 canonical JSON, and the canonical forms of a Message and an AgentCard."""

from __future__ import annotations

import importlib.util
import json
import math
import random
import struct
from pathlib import Path
from typing import Any

import pytest

from a2a_grpc.core.canonical import (
    MAX_DEPTH,
    CanonicalizationError,
    canonical_card_bytes,
    canonical_message_bytes,
    canonicalize,
    format_number,
)
from a2a_grpc.generated import a2a_pb2

# RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text.
RFC8785_NUMBERS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


def _double(bits: str) -> float:
    value: float = struct.unpack(">d", bytes.fromhex(bits))[0]
    return value


@pytest.mark.parametrize(("bits", "expected"), RFC8785_NUMBERS)
def test_rfc8785_appendix_b_numbers(bits: str, expected: str) -> None:
    assert format_number(_double(bits)) == expected


@pytest.mark.parametrize(
    ("literal", "expected"),
    [
        # RFC 8785 §3.2.2.3 and ECMAScript's plain/exponent boundaries.
        (333333333.33333329, "333333333.3333333"),
        (1e30, "1e+30"),
        (4.50, "4.5"),
        (2e-3, "0.002"),
        (0.000000000000000000000000001, "1e-27"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (0.000001, "0.000001"),
        (123.0, "123"),
        (-0.0, "0"),
        (0.1, "0.1"),
        (-1.25e300, "-1.25e+300"),
        (10**15, "1000000000000000"),
        (2**53 - 1, "9007199254740991"),
        (-7, "-7"),
    ],
)
def test_ecmascript_number_text(literal: float, expected: str) -> None:
    assert format_number(literal) == expected


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 2**53, -(2**60)])
def test_numbers_without_a_canonical_form(bad: float) -> None:
    with pytest.raises(CanonicalizationError):
        canonicalize([bad])


def test_rfc8785_section_3_2_2_example() -> None:
    value = {
        "numbers": [333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001],
        "string": "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/",
        "literals": [None, True, False],
    }
    assert (
        canonicalize(value)
        == (
            '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
            '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
        ).encode()
    )


def test_rfc8785_section_3_2_3_key_order_is_by_utf16_code_units() -> None:
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    keys = [
        "\r",
        "1",
        "\u0080",
        "\u00f6",
        "\u20ac",
        "\U0001f600",  # its surrogates D83D DE00 sort before U+FB33; code points would not
        "\ufb33",
    ]
    expected = "{" + ",".join(f'"{_escaped(k)}":"{value[k]}"' for k in keys) + "}"
    assert canonicalize(value) == expected.encode("utf-8")


def _escaped(key: str) -> str:
    return "\\r" if key == "\r" else key


def test_string_escaping_is_minimal() -> None:
    text = '\b\t\n\f\r\x00\x1f\x7f\u2028 é"\\/'
    assert canonicalize(text) == '"\\b\\t\\n\\f\\r\\u0000\\u001f\x7f\u2028 é\\"\\\\/"'.encode()


def test_no_whitespace_and_nesting() -> None:
    assert (
        canonicalize({"b": [1, {"d": [], "c": {}}], "a": ""}) == b'{"a":"","b":[1,{"c":{},"d":[]}]}'
    )


@pytest.mark.parametrize(
    "bad",
    [{1: "x"}, "\ud800", {"\udc00": 1}, b"bytes", {"a": object()}],
    ids=["int-key", "lone-surrogate", "surrogate-key", "bytes", "object"],
)
def test_values_without_a_json_form(bad: Any) -> None:
    with pytest.raises(CanonicalizationError):
        canonicalize(bad)


def test_depth_limit() -> None:
    deep: Any = []
    for _ in range(MAX_DEPTH - 1):
        deep = [deep]
    canonicalize(deep)
    with pytest.raises(CanonicalizationError, match="deeper"):
        canonicalize([deep])


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1_000, 100_000])
def test_hostile_nesting_is_refused_without_recursing(depth: int) -> None:
    # rfc8785 alone recurses per level: RecursionError near 1,000 (see core/canonical.py).
    hostile: Any = "x"
    for level in range(depth):
        hostile = [hostile] if level % 2 else {"a": hostile}
    with pytest.raises(CanonicalizationError, match="deeper than 128"):
        canonicalize({"metadata": hostile})


def test_a_received_card_document_with_a_lone_surrogate_key_is_no_crash() -> None:
    # JSON text "\udc00" decodes to a lone surrogate; rfc8785 alone lets UnicodeEncodeError out.
    document = json.loads('{"name": "x", "x-unknown": {"\\udc00": 1}}')
    with pytest.raises(CanonicalizationError, match="surrogate"):
        canonicalize(document)


def _sdk_canonicalize() -> Any:
    """The official SDK's own JCS, loaded by path: importing the `a2a` package would register
    proto symbols that clash with ours."""
    spec = importlib.util.find_spec("a2a")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("a2a-sdk is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "utils" / "_jcs.py"
    if not path.exists():
        pytest.skip("this a2a-sdk has no utils/_jcs.py")
    module_spec = importlib.util.spec_from_file_location("_sdk_jcs_under_test", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.canonicalize


def test_agrees_with_the_sdk_jcs_on_random_doubles_and_keys() -> None:
    sdk = _sdk_canonicalize()
    rng = random.Random(8785)
    numbers: list[float] = []
    while len(numbers) < 3000:
        value = _double(rng.getrandbits(64).to_bytes(8, "big").hex())
        if math.isfinite(value):
            numbers.append(value)
    numbers += [rng.uniform(-1e6, 1e6) for _ in range(500)] + list(range(-50, 50))
    keys = {"".join(chr(rng.choice([0x41, 0xE9, 0x20AC, 0xFB33, 0x1F600])) for _ in range(3)): 1}
    for key in range(200):
        keys[f"k{key}\u00e9\U0001f600"[: key % 5 + 1]] = key
    document = {"n": numbers, "k": keys, "s": '\x00\x1f\x7f\u2028"\\'}
    assert canonicalize(document) == sdk(document).encode("utf-8")


def _message() -> a2a_pb2.Message:
    message = a2a_pb2.Message(
        message_id="m-1",
        role=a2a_pb2.ROLE_USER,
        parts=[a2a_pb2.Part(text="héllo")],
        reference_task_ids=["t-0"],
    )
    message.metadata.update({"urn:x": {"n": 2.5}, "urn:sig": {"jws": "a..b"}})
    return message


def test_message_form_is_default_protojson_with_camel_case_and_no_defaults() -> None:
    assert (
        canonical_message_bytes(_message())
        == (
            '{"messageId":"m-1","metadata":{"urn:sig":{"jws":"a..b"},"urn:x":{"n":2.5}},'
            '"parts":[{"text":"héllo"}],"referenceTaskIds":["t-0"],"role":"ROLE_USER"}'
        ).encode()
    )


def test_message_form_without_an_extension_entry() -> None:
    message = _message()
    assert b'"urn:sig"' not in canonical_message_bytes(message, without_extension="urn:sig")
    assert b'"urn:x"' in canonical_message_bytes(message, without_extension="urn:sig")
    del message.metadata["urn:x"]
    # The only entry gone: metadata itself is dropped, exactly as if it had never been set.
    bare = a2a_pb2.Message()
    bare.CopyFrom(message)
    bare.ClearField("metadata")
    assert canonical_message_bytes(message, without_extension="urn:sig") == (
        canonical_message_bytes(bare)
    )
    empty_but_set = a2a_pb2.Message()
    empty_but_set.CopyFrom(bare)
    empty_but_set.metadata.Clear()
    assert empty_but_set.HasField("metadata")
    assert canonical_message_bytes(empty_but_set, without_extension="urn:sig") == (
        canonical_message_bytes(bare)
    )


def test_card_form_keeps_required_fields_and_set_optionals_and_drops_signatures() -> None:
    card = a2a_pb2.AgentCard(
        name="echo",
        version="1",
        capabilities=a2a_pb2.AgentCapabilities(streaming=False),
        supported_interfaces=[
            a2a_pb2.AgentInterface(url="h:1", protocol_binding="GRPC", protocol_version="1.0")
        ],
        skills=[a2a_pb2.AgentSkill(id="s", name="S", tags=["t"])],
        signatures=[a2a_pb2.AgentCardSignature(protected="p", signature="s")],
    )
    assert canonical_card_bytes(card) == (
        b'{"capabilities":{"streaming":false},"defaultInputModes":[],"defaultOutputModes":[],'
        b'"description":"","name":"echo","skills":[{"description":"","id":"s","name":"S",'
        b'"tags":["t"]}],"supportedInterfaces":[{"protocolBinding":"GRPC",'
        b'"protocolVersion":"1.0","url":"h:1"}],"version":"1"}'
    )


def test_card_form_walks_maps_and_leaves_struct_values_alone() -> None:
    card = a2a_pb2.AgentCard(name="n")
    card.security_schemes["key"].api_key_security_scheme.name = "x-api-key"
    extension = card.capabilities.extensions.add(uri="urn:e")
    extension.params.update({"empty": "", "list": []})
    text = canonical_card_bytes(card).decode()
    assert (
        '"securitySchemes":{"key":{"apiKeySecurityScheme":{"location":"","name":"x-api-key"}}}'
        in (text)
    )
    assert '"extensions":[{"params":{"empty":"","list":[]},"uri":"urn:e"}]' in text


def test_audit_lines_are_jcs(tmp_path: Path) -> None:
    from a2a_grpc.server.trust.audit import AuditLog

    path = tmp_path / "audit.jsonl"
    audit = AuditLog(path)  # no event loop here: records are written at once
    audit.outcome(
        task_id="",
        state="COMPLETED",
        principal="alice",
        tenant='ünïcode\u2028\t"quoted"\\',
        message_id="m1",
        cost={"currency": "EUR", "amount": "1.50"},
    )
    audit.request(method="GetTask", principal="", tenant="", outcome="OK")  # null cost
    audit.close()
    lines = path.read_bytes().splitlines()
    assert len(lines) == 2
    for line in lines:
        assert line == canonicalize(json.loads(line))
