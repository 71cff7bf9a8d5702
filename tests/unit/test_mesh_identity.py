"""SPIFFE IDs, Envoy's x-forwarded-client-cert, and the authenticators that read them."""

from __future__ import annotations

import pytest

from a2a_grpc.server.cli import config_from_args, parser
from a2a_grpc.server.config import ServerConfig
from a2a_grpc.server.trust.auth import (
    AllOf,
    AnyOf,
    AuthenticationError,
    BearerTokens,
    ClientCertificates,
    ForwardedClientCert,
    Presented,
)
from a2a_grpc.server.trust.mesh import (
    DEFAULT_TRUSTED_PROXIES,
    MalformedXfcc,
    forwarded_spiffe_id,
    grpc_peer_address,
    is_trusted,
    parse_xfcc,
    spiffe_id_problem,
    trusted_networks,
)

SVC_A = "spiffe://prod.example/ns/shop/sa/a"
SVC_B = "spiffe://prod.example/ns/shop/sa/b"
SIDECAR = "spiffe://prod.example/ns/shop/sa/server"


@pytest.mark.parametrize(
    "uri",
    [
        "spiffe://td",
        "spiffe://td/ns/x/sa/y",
        "spiffe://a-b_c.d9/Path.With-Mixed_Case",
    ],
)
def test_valid_spiffe_ids(uri: str) -> None:
    assert spiffe_id_problem(uri) is None


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        ("SPIFFE://td/x", "lowercase"),
        ("https://td/x", "starts with"),
        ("spiffe://TD/x", "lowercase letters"),
        ("spiffe://td:8080/x", "port"),
        ("spiffe://user@td/x", "userinfo"),
        ("spiffe://td/x?y=1", "query"),
        ("spiffe://td/x#y", "fragment"),
        ("spiffe://td/x/", "empty segment"),
        ("spiffe://td//x", "empty segment"),
        ("spiffe://td/./x", "'.'"),
        ("spiffe://td/../x", "'..'"),
        ("spiffe://td/a%20b", "percent"),
        ("spiffe:///x", "empty"),
        ("spiffe://td/" + "a" * 2048, "2048"),
    ],
)
def test_invalid_spiffe_ids(uri: str, problem: str) -> None:
    found = spiffe_id_problem(uri)
    assert found is not None and problem in found, found


def test_xfcc_elements_pairs_quotes_and_escapes() -> None:
    header = (
        'By=spiffe://td/sidecar;Hash=abc;Subject="CN=a, O=\\"Acme; Inc\\"";URI=spiffe://td/a;'
        "DNS=a.example;DNS=b.example, By=x;URI=spiffe://td/b"
    )
    first, second = parse_xfcc(header)
    assert first == [
        ("by", "spiffe://td/sidecar"),
        ("hash", "abc"),
        ("subject", 'CN=a, O="Acme; Inc"'),
        ("uri", "spiffe://td/a"),
        ("dns", "a.example"),
        ("dns", "b.example"),
    ]
    assert second == [("by", "x"), ("uri", "spiffe://td/b")]


@pytest.mark.parametrize(
    ("header", "problem"),
    [
        ("", "element 1 is empty"),
        ("By=a,,URI=spiffe://td/a", "element 2 is empty"),
        ("URI=spiffe://td/a,", "ends with ','"),
        ("URI=spiffe://td/a;", "empty pair"),
        ("URI", "not key=value"),
        ("=x", "not a key"),
        ('Subject="CN=a', "not closed"),
        ('Subject="CN=a"x;URI=spiffe://td/a', "followed by 'x'"),
        ("Subject=CN=a", "holds '=' unquoted"),
        ("By=a;By=b", "By twice"),
        ("URI=spiffe://td/a\x01", "control character"),
        ("By=a b;URI=x", None),  # a space inside an unquoted value is no separator
    ],
)
def test_malformed_xfcc_says_what(header: str, problem: str | None) -> None:
    if problem is None:
        parse_xfcc(header)
        return
    with pytest.raises(MalformedXfcc, match=problem) as caught:
        parse_xfcc(header)
    assert str(caught.value).startswith("malformed x-forwarded-client-cert: ")


def test_the_last_element_is_the_local_sidecars() -> None:
    # APPEND_FORWARD: an edge proxy's element first, the sidecar's appended at the end.
    upstream = f"By=spiffe://edge/gw;URI={SVC_B}"
    local = f'By={SIDECAR};Hash=00ff;Subject="";URI={SVC_A}'
    assert forwarded_spiffe_id([f"{upstream},{local}"]) == SVC_A
    assert forwarded_spiffe_id([upstream, local]) == SVC_A  # two header lines read as one
    with pytest.raises(ValueError, match="names no SPIFFE ID"):
        forwarded_spiffe_id([f"URI={SVC_A},By={SIDECAR};DNS=a.example"])
    with pytest.raises(ValueError, match="names 2 SPIFFE IDs"):
        forwarded_spiffe_id([f"URI={SVC_A};URI={SVC_B}"])
    with pytest.raises(ValueError, match="not a valid SPIFFE ID"):
        forwarded_spiffe_id(["URI=spiffe://TD/x"])
    with pytest.raises(ValueError, match="trust domain 'other' is not accepted"):
        forwarded_spiffe_id(["URI=spiffe://other/x"], ("prod.example",))
    # The forwarded certificate's URI SANs: one more beside the SPIFFE ID makes it no X509-SVID.
    with pytest.raises(ValueError, match="has 2 URI SANs, one a SPIFFE ID"):
        forwarded_spiffe_id([f"URI=https://a.example;URI={SVC_A}"])


@pytest.mark.parametrize(
    ("peer", "address"),
    [
        ("ipv4:127.0.0.1:5555", "127.0.0.1"),
        ("ipv6:[::1]:5555", "::1"),
        ("ipv6:[fe80::1%eth0]:80", "fe80::1"),
        ("unix:/tmp/sock", None),
        ("", None),
        (None, None),
    ],
)
def test_grpc_peer_address(peer: str | None, address: str | None) -> None:
    assert grpc_peer_address(peer) == address


def test_trusted_proxies() -> None:
    loopback = trusted_networks(DEFAULT_TRUSTED_PROXIES)
    assert is_trusted("127.0.0.1", loopback) and is_trusted("127.9.9.9", loopback)
    assert is_trusted("::1", loopback) and is_trusted("::ffff:127.0.0.1", loopback)
    assert not is_trusted("10.1.2.3", loopback)
    assert not is_trusted(None, loopback) and not is_trusted("not-an-ip", loopback)
    assert is_trusted("10.1.2.3", trusted_networks(["10.0.0.0/8", "192.0.2.7"]))
    with pytest.raises(ValueError, match=r"'10\.0\.0\.1/8' is not a CIDR"):
        trusted_networks(["10.0.0.1/8"])


def cert(cn: str | None = None, *uris: str) -> dict[str, list[bytes]]:
    """A client certificate's names as gRPC's auth context has them."""
    names: dict[str, list[bytes]] = {"x509_common_name": [(cn or "").encode()]}
    if uris:
        names["peer_uri"] = [uri.encode() for uri in uris]
    return names


def test_client_certificates_prefer_the_spiffe_id_over_the_cn() -> None:
    certificates = ClientCertificates()
    assert certificates.authenticate(Presented(peer=cert("svc", SVC_A))) == SVC_A
    assert certificates.authenticate(Presented(peer=cert(None, SVC_A))) == SVC_A
    assert certificates.authenticate(Presented(peer=cert("svc"))) == "cert:svc"
    assert certificates.authenticate(Presented(peer=cert("svc", "https://a.example"))) == (
        "cert:svc"
    )
    assert certificates.authenticate(Presented()) is None
    assert certificates.authenticate(Presented(peer=cert(None))) is None  # grpc's empty CN
    with pytest.raises(AuthenticationError, match="names 2 SPIFFE IDs"):
        certificates.authenticate(Presented(peer=cert("svc", SVC_A, SVC_B)))
    # X509-SVID §2: exactly one URI SAN, so a SPIFFE ID beside another URI is refused too.
    for uris in ((SVC_A, "https://a.example"), ("https://a.example", SVC_A)):
        with pytest.raises(AuthenticationError, match="has 2 URI SANs, one a SPIFFE ID"):
            certificates.authenticate(Presented(peer=cert("svc", *uris)))
    with pytest.raises(AuthenticationError, match="not a valid SPIFFE ID"):
        certificates.authenticate(Presented(peer=cert("svc", "spiffe://td:1/x")))


def test_trust_domains_refuse_others_and_certificates_without_a_spiffe_id() -> None:
    certificates = ClientCertificates(("prod.example",))
    assert certificates.authenticate(Presented(peer=cert("svc", SVC_A))) == SVC_A
    with pytest.raises(AuthenticationError, match=r"trust domain 'staging\.example'"):
        certificates.authenticate(Presented(peer=cert("svc", "spiffe://staging.example/a")))
    with pytest.raises(AuthenticationError, match="has no SPIFFE ID"):
        certificates.authenticate(Presented(peer=cert("svc")))


def xfcc(value: str) -> tuple[tuple[str, str], ...]:
    return (("x-forwarded-client-cert", value),)


def test_forwarded_client_cert_only_from_a_trusted_proxy() -> None:
    forwarded = ForwardedClientCert(
        AnyOf((ClientCertificates(),)), trusted_networks(DEFAULT_TRUSTED_PROXIES)
    )
    header = xfcc(f"By={SIDECAR};URI={SVC_A}")
    assert forwarded.authenticate(Presented(header, remote="127.0.0.1")) == SVC_A
    # The sidecar's own certificate only admits the connection: the forwarded ID names the caller.
    sidecar = Presented(header, cert("sidecar", SIDECAR), "::1")
    assert forwarded.authenticate(sidecar) == SVC_A
    with pytest.raises(AuthenticationError, match=r"only from a trusted proxy.*10\.0\.0\.5"):
        forwarded.authenticate(Presented(header, remote="10.0.0.5"))
    with pytest.raises(AuthenticationError, match="not IP"):
        forwarded.authenticate(Presented(header, remote=None))
    with pytest.raises(AuthenticationError, match="malformed x-forwarded-client-cert"):
        forwarded.authenticate(Presented(xfcc("URI"), remote="127.0.0.1"))
    # Without the header: the connection's own certificate, from anywhere.
    assert forwarded.authenticate(Presented(peer=cert("svc"), remote="10.0.0.5")) == "cert:svc"


def test_forwarded_client_cert_with_bearer_tokens() -> None:
    tokens = BearerTokens({"s3cret": "alice"})
    networks = trusted_networks(DEFAULT_TRUSTED_PROXIES)
    header = xfcc(f"URI={SVC_A}")
    token = (("authorization", "Bearer s3cret"),)
    # No client CA: a token or the sidecar's word; with both, the token names the caller.
    either = ForwardedClientCert(AnyOf((tokens, ClientCertificates())), networks)
    assert either.authenticate(Presented(header, remote="127.0.0.1")) == SVC_A
    assert either.authenticate(Presented(token, remote="10.0.0.5")) == "alice"
    assert either.authenticate(Presented((*token, *header), remote="127.0.0.1")) == "alice"
    with pytest.raises(AuthenticationError, match="trusted proxy"):  # the header still checked
        either.authenticate(Presented((*token, *header), remote="10.0.0.5"))
    # With a client CA: both, as with a certificate.
    both = ForwardedClientCert(AllOf((tokens, ClientCertificates())), networks)
    assert both.authenticate(Presented((*token, *header), remote="127.0.0.1")) == "alice"
    with pytest.raises(AuthenticationError, match="both"):
        both.authenticate(Presented(header, remote="127.0.0.1"))


def test_what_a_caller_must_send_names_the_configured_kinds() -> None:
    only_xfcc = AnyOf((ClientCertificates(wants="x-forwarded-client-cert from a trusted proxy"),))
    with pytest.raises(AuthenticationError, match="send x-forwarded-client-cert"):
        only_xfcc.authenticate(Presented())
    with pytest.raises(AuthenticationError) as caught:
        AnyOf((BearerTokens({"t": "p"}),)).authenticate(Presented())
    assert (
        str(caught.value) == "this server needs credentials: send 'authorization: Bearer <token>'"
    )


def test_the_mesh_options_reach_their_fields() -> None:
    args = parser().parse_args(
        [
            "--trust-domain",
            "prod.example,staging.example",
            "--trust-domain",
            "dev.example",
            "--trust-xfcc",
            "--trusted-proxy",
            "10.0.0.0/8",
        ]
    )
    config = config_from_args(args)
    assert config.trust_domain == ("prod.example", "staging.example", "dev.example")
    assert (config.trust_xfcc, config.trusted_proxy) == (True, ("10.0.0.0/8",))
    assert config_from_args(parser().parse_args([])).trusted_proxy == DEFAULT_TRUSTED_PROXIES


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"trust_domain": ("Prod.Example",)}, "trust_domain: trust domain 'Prod.Example'"),
        ({"trust_domain": ("td:443",)}, "trust_domain"),
        ({"trusted_proxy": ("10.0.0.300/8",)}, "is not a CIDR"),
        ({"trusted_proxy": ()}, "at least one network"),
    ],
)
def test_bad_mesh_settings_are_refused(fields: dict[str, tuple[str, ...]], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        ServerConfig(**fields)  # type: ignore[arg-type]
