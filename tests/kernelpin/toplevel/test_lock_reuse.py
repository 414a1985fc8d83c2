"""Issue 30 (performance): a commit's files never change, so `lock` reads a variant's metadata.json from the Hub
cache when the cache holds it (checked against the listing's git blob id, as a download is) and keeps what it
fetched there; before, every lock fetched every variant's metadata.json again (100 of 168 requests at 20
kernels). A cached copy that does not match the listing is never used."""

from __future__ import annotations

from kernelpin.files.integrity import git_blob_sha1
from kernelpin.store import lockfiles
from testkit.fake_kernel import VARIANTS, publish
from tests.kernelpin.faulty_hub import HostileHub, Lies
from tests.kernelpin.helpers import snapshot_dir


def metadata_requests(server: HostileHub) -> list[str]:
    return [path for _, path in server.arrivals if path.endswith("/metadata.json")]


def test_a_relock_reads_metadata_from_the_cache_and_never_a_wrong_copy(
    hub, new_repo, project, cli, hf_env, monkeypatch
):
    repo_id, repo = new_repo("reused", "kernel")
    commit = publish(repo, "1.0.0", variants=VARIANTS)
    project(f'"{repo_id}" = "^1"\n')
    first, again = HostileHub(hub.endpoint, Lies()), HostileHub(hub.endpoint, Lies())
    with first as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        status, _, err = cli("lock")
        assert status == 0, err
    assert len(metadata_requests(first)) == len(VARIANTS)
    locked = lockfiles.read(hf_env.parent / "app" / "kernelpin.lock")
    with again as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        status, _, err = cli("lock", "--upgrade")
        assert status == 0, err
    # Failed before: 5 more GETs of the same metadata.json.
    assert metadata_requests(again) == [] and again.requests > 0  # the refs and the file listing only
    assert lockfiles.read(hf_env.parent / "app" / "kernelpin.lock") == locked
    # What lock keeps is huggingface_hub's blob (named by its git blob id), no snapshot: nothing is installed.
    blobs = sorted((hf_env / f"kernels--{repo_id.replace('/', '--')}" / "blobs").iterdir())
    assert [git_blob_sha1(blob.read_bytes()) for blob in blobs] == [blob.name for blob in blobs]
    assert len(blobs) == len(VARIANTS) and not snapshot_dir(hf_env, repo_id, commit, "kernel").exists()
    # A cached copy edited (or planted) to pin other digests is not taken: it does not match the listing.
    edited = blobs[0].read_bytes().replace(b'"', b"'", 1)
    blobs[0].write_bytes(edited)
    checked = HostileHub(hub.endpoint, Lies())
    with checked as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        status, _, err = cli("lock", "--upgrade")
        assert status == 0, err
    assert len(metadata_requests(checked)) == 1
    assert lockfiles.read(hf_env.parent / "app" / "kernelpin.lock") == locked
    assert blobs[0].read_bytes() != edited  # replaced by what the lock fetched
    # A synced variant's metadata.json is read from its snapshot, as `kernels download` leaves it too.
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    status, _, err = cli("sync", "--torch", "2.13")
    assert status == 0, err
    status, out, err = cli("verify")
    assert status == 0, out + err
    for blob in blobs:
        blob.unlink()
    synced = HostileHub(hub.endpoint, Lies())
    with synced as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        assert cli("lock", "--upgrade")[0] == 0
    assert len(metadata_requests(synced)) == len(VARIANTS) - 1
