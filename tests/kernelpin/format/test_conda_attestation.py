"""kernelpin.format.conda_attestation against conda-sigstore 0.1.5's own statement and sidecar code: the payload we
sign is the byte string conda-sigstore builds for the same package, and what either refuses the other refuses."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernelpin.format.conda_attestation import (
    PUBLISH_PREDICATE_TYPE,
    AttestationError,
    channel_url,
    check_binds,
    parse_publication_statement,
    parse_sidecar,
    publication_statement,
    sidecar_bytes,
    sidecar_name,
)
from testkit import conda_host

conda_host.install()  # before conda_sigstore, which imports three names from conda
from conda_sigstore.exceptions import PublishStatementError, TransportError
from conda_sigstore.statements import PublishStatement
from conda_sigstore.transport import SidecarTransport

PACKAGE = "img2gray-0.3.0-cuda130_torch_stable_h1a2b3c4_0.conda"
SHA = hashlib.sha256(b"img2gray").hexdigest()
CHANNEL = "https://conda.example.org/img2gray"


def test_payload_is_conda_sigstores_byte_for_byte() -> None:
    for channel, normal in (
        (CHANNEL, CHANNEL),
        ("HTTP://127.0.0.1:8123/get/img2gray", "http://127.0.0.1:8123/get/img2gray"),
        ("https://Conda.Example.org:443/a/b", "https://conda.example.org/a/b"),
    ):
        ours = publication_statement(PACKAGE, SHA.upper(), channel)
        theirs = PublishStatement(PACKAGE, SHA.upper(), target_channel=channel)
        assert ours.payload() == theirs.payload()
        assert ours.target_channel == normal == theirs.target_channel
        assert json.loads(ours.payload())["predicateType"] == PUBLISH_PREDICATE_TYPE


_names = st.from_regex(r"[a-z][a-z0-9_.]{0,15}-[0-9][0-9a-z.]{0,8}-[a-z0-9_]{1,20}\.(conda|tar\.bz2)", fullmatch=True)
# conda reads a path segment "t" as the start of anaconda.org's token (/t/<token>): such channels are refused, where
# conda-sigstore takes them ("a channel with a token" below).
_paths = st.from_regex(r"(/[a-z0-9_.~-]{1,12}){0,3}", fullmatch=True).filter(lambda path: "/t/" not in path)


@given(
    name=_names,
    digest=st.binary(min_size=1, max_size=8),
    host=st.sampled_from(["prefix.dev", "127.0.0.1", "conda.anaconda.org", "[::1]"]),
    port=st.one_of(st.none(), st.integers(1, 65535)),
    path=_paths,
)
def test_any_package_and_channel_agree_with_conda_sigstore(
    name: str, digest: bytes, host: str, port: int | None, path: str
) -> None:
    url = f"https://{host}{'' if port is None else f':{port}'}{path}"
    sha = hashlib.sha256(digest).hexdigest()
    ours = publication_statement(name, sha, url)
    theirs = PublishStatement(name, sha, target_channel=url)
    assert ours.payload() == theirs.payload()
    back = PublishStatement.from_payload(ours.payload())
    assert (back.filename, back.sha256, back.target_channel) == (name, sha, ours.target_channel)
    assert parse_publication_statement(theirs.payload()) == ours


def _statement(**changes: object) -> bytes:
    value = publication_statement(PACKAGE, SHA, CHANNEL).to_json()
    value.update(changes)
    return json.dumps(value).encode()


# Statements conda-sigstore refuses; ours must refuse each of them too.
HOSTILE_STATEMENTS = {
    "two subjects": _statement(subject=[{"name": PACKAGE, "digest": {"sha256": SHA}}] * 2),
    "no subject": _statement(subject=[]),
    "a second digest": _statement(subject=[{"name": PACKAGE, "digest": {"sha256": SHA, "sha512": "00"}}]),
    "no sha256": _statement(subject=[{"name": PACKAGE, "digest": {"md5": "0" * 32}}]),
    "short sha256": _statement(subject=[{"name": PACKAGE, "digest": {"sha256": SHA[:-1]}}]),
    "a path as name": _statement(subject=[{"name": "../" + PACKAGE, "digest": {"sha256": SHA}}]),
    "not a package": _statement(subject=[{"name": "img2gray.whl", "digest": {"sha256": SHA}}]),
    "another predicate type": _statement(predicateType="https://slsa.dev/provenance/v1"),
    "another statement type": _statement(_type="https://in-toto.io/Statement/v0.1"),
    "a predicate without channel": _statement(predicate={"channel": CHANNEL}),
    "a channel with a slash": _statement(predicate={"targetChannel": CHANNEL + "/"}),
    "a channel with a token": _statement(predicate={"targetChannel": "https://conda.anaconda.org/t/tk-1-2/acme"}),
    "a channel with a password": _statement(predicate={"targetChannel": "https://me:pw@prefix.dev/acme"}),
    "an ftp channel": _statement(predicate={"targetChannel": "ftp://prefix.dev/acme"}),
    "a list as predicate": _statement(predicate=[CHANNEL]),
    "a duplicated key": _statement()[:-1] + b', "predicate": null}',
    "NaN": _statement(predicate={"targetChannel": CHANNEL, "x": float("nan")}),
    "not JSON": b"\xff\xfe",
    "an array": b"[]",
}


@pytest.mark.parametrize("case", sorted(HOSTILE_STATEMENTS))
def test_both_refuse_the_same_hostile_statements(case: str) -> None:
    payload = HOSTILE_STATEMENTS[case]
    with pytest.raises(PublishStatementError):
        PublishStatement.from_payload(payload)
    with pytest.raises(AttestationError):
        parse_publication_statement(payload)


def test_a_statement_without_predicate_is_read_as_conda_sigstore_reads_it() -> None:
    payload = _statement(predicate=None)
    assert parse_publication_statement(payload).target_channel is None
    assert PublishStatement.from_payload(payload).target_channel is None


def test_oversized_statement_is_refused_before_parsing() -> None:
    with pytest.raises(AttestationError, match="at most"):
        parse_publication_statement(b" " * 70_000 + _statement())


def test_binding_names_the_mismatch() -> None:
    statement = publication_statement(PACKAGE, SHA, CHANNEL)
    check_binds(statement, PACKAGE, SHA.upper(), CHANNEL + "")
    other = PACKAGE.replace("0.3.0", "0.3.1")
    with pytest.raises(AttestationError, match=f"for {PACKAGE}, not {other}"):
        check_binds(statement, other, SHA)
    with pytest.raises(AttestationError, match="not the ones that were signed"):
        check_binds(statement, PACKAGE, "0" * 64)
    with pytest.raises(AttestationError, match="attested for channel"):
        check_binds(statement, PACKAGE, SHA, "https://prefix.dev/img2gray")
    # conda-sigstore's own binding refuses the same three.
    theirs = PublishStatement.from_payload(statement.payload())
    for name, sha, channels in ((other, SHA, ()), (PACKAGE, "0" * 64, ()), (PACKAGE, SHA, ("https://prefix.dev/x",))):
        with pytest.raises(PublishStatementError):
            theirs.bind(expected_filename=name, expected_sha256=sha, accepted_target_channels=channels)


@pytest.mark.parametrize("url", ["", "prefix.dev/acme", "https://", "https://prefix.dev/acme?x=1", "https://h:99999/a"])
def test_channel_url_refuses(url: str) -> None:
    with pytest.raises(AttestationError):
        channel_url(url)
    with pytest.raises(PublishStatementError):
        PublishStatement.validate_target_channel(url)


def test_capitals_in_a_package_name_are_refused() -> None:
    with pytest.raises(AttestationError, match="lowercase"):
        publication_statement(PACKAGE.replace("img2gray", "Img2Gray"), SHA, CHANNEL)


BUNDLES = ['{"mediaType": "a", "n": 1}', '{"mediaType":"b"}\n']


def test_sidecar_is_what_conda_sigstore_reads() -> None:
    body = sidecar_bytes(BUNDLES)
    assert body == b'[{"mediaType": "a", "n": 1},{"mediaType":"b"}]'  # each bundle's bytes kept, in order
    sidecar = SidecarTransport.parse(body)
    assert [json.loads(bundle) for bundle in sidecar.bundles] == [json.loads(bundle) for bundle in BUNDLES]
    digest = hashlib.sha256(body).hexdigest()
    assert sidecar.sha256 == digest
    assert sidecar_name(PACKAGE, body) == f"{PACKAGE}.sigs.{digest}"
    assert [json.loads(bundle) for bundle in parse_sidecar(body, digest)] == [json.loads(b) for b in BUNDLES]
    # Fetched for repodata's hash, through conda-sigstore's transport (its fetcher hook stands for HTTP).
    loaded = SidecarTransport(fetcher=lambda url, limit: body).load_repodata(f"https://h/c/linux-64/{PACKAGE}", digest)
    assert loaded.bundles == sidecar.bundles


def test_a_sidecar_with_other_bytes_than_repodata_says_is_refused_by_both() -> None:
    body = sidecar_bytes(BUNDLES)
    wrong = hashlib.sha256(body + b" ").hexdigest()
    with pytest.raises(AttestationError, match="repodata says"):
        parse_sidecar(body, wrong)
    with pytest.raises(TransportError):
        SidecarTransport(fetcher=lambda url, limit: body).load_repodata(f"https://h/c/{PACKAGE}", wrong)
    with pytest.raises(AttestationError, match="lowercase"):
        parse_sidecar(body, hashlib.sha256(body).hexdigest().upper())


@pytest.mark.parametrize("body", [b"[]", b"{}", b"[1]", b'[{"a":1,"a":2}]', b"\xff"])
def test_malformed_sidecars_are_refused_by_both(body: bytes) -> None:
    with pytest.raises(AttestationError):
        parse_sidecar(body, hashlib.sha256(body).hexdigest())
    with pytest.raises(TransportError):
        SidecarTransport.parse(body)


@pytest.mark.parametrize("bundles", [[], ["[1]"], ["not json"]])
def test_sidecar_needs_bundle_objects(bundles: list[str]) -> None:
    with pytest.raises(AttestationError):
        sidecar_bytes(bundles)
