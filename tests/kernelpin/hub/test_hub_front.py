"""The test Hub's kernel repositories (testkit/hub_front.py over a second olah): the Hub's kernel paths are
answered from real git repositories, with the HTTP details huggingface_hub relies on."""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from huggingface_hub import HfApi, hf_hub_download

from testkit.fake_kernel import CPU_213, publish
from testkit.hub_front import rewrite_location, route
from tests.kernelpin.helpers import UNTRUSTED_ORG


def request(url: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=30) as reply:
            return reply.status, {k.lower(): v for k, v in reply.headers.items()}, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


@pytest.mark.parametrize(
    ("path", "kind", "upstream"),
    [
        ("/api/kernels/acme/k/refs", "kernel", "/api/models/acme/k/refs"),
        ("/kernels/acme/k/resolve/v1/build/x/a.py", "kernel", "/acme/k/resolve/v1/build/x/a.py"),
        (
            "/api/kernels/acme/k/tree/refs%2Fheads%2Fv0/build?recursive=false",
            "kernel",
            "/api/models/acme/k/tree/v0/build?recursive=false",
        ),
        ("/api/models/acme/m/refs", "model", "/api/models/acme/m/refs"),
        ("/acme/m/resolve/main/a.py", "model", "/acme/m/resolve/main/a.py"),
    ],
)
def test_route(path, kind, upstream):
    assert route(path) == (kind, upstream)


def test_redirects_point_back_at_the_front_on_the_type_asked_for():
    front = "http://127.0.0.1:9"
    assert (
        rewrite_location("http://127.0.0.1:5/acme/k/resolve/abc/a.py", "kernel", front)
        == f"{front}/kernels/acme/k/resolve/abc/a.py"
    )
    assert rewrite_location("/api/models/acme/k/tree/abc", "kernel", front) == "/api/kernels/acme/k/tree/abc"
    assert (
        rewrite_location("http://127.0.0.1:5/acme/m/resolve/abc/a.py", "model", front)
        == f"{front}/acme/m/resolve/abc/a.py"
    )


def test_kernel_repositories_are_served_apart_from_model_repositories(hub, new_repo):
    repo_id, repo = new_repo("front", "kernel")
    big = os.urandom(3 << 20)  # streamed through the front
    commit = publish(repo, "1.0.0", variants=(CPU_213,), extra={"_big.so": big})
    api = HfApi(endpoint=hub.endpoint)
    refs = api.list_repo_refs(repo_id, repo_type="kernel")
    assert {t.name: t.target_commit for t in refs.tags} == {"v1.0.0": commit}
    status, _, _ = request(f"{hub.endpoint}/api/models/{repo_id}/refs")
    assert status in (401, 404)  # a kernel repository is not a model repository

    path = f"build/{CPU_213}/_big.so"
    status, headers, body = request(f"{hub.endpoint}/kernels/{repo_id}/resolve/{commit}/{path}", "HEAD")
    assert status == 200 and body == b""
    assert int(headers["content-length"]) == len(big)  # huggingface_hub reads a file's size from HEAD
    downloaded = hf_hub_download(
        repo_id,
        path,
        revision=commit,
        repo_type="kernel",
        endpoint=hub.endpoint,
        cache_dir=hub.root / f"cache-{repo_id.split('/')[1]}",
    )
    assert hashlib.sha256(Path(downloaded).read_bytes()).digest() == hashlib.sha256(big).digest()


def test_organization_overview_says_whether_a_publisher_is_trusted(hub):
    assert request(f"{hub.endpoint}/api/organizations/{UNTRUSTED_ORG}/overview")[0] == 200
    assert HfApi(endpoint=hub.endpoint).get_organization_overview(UNTRUSTED_ORG).trustedKernelPublisher is False


def test_the_log_has_a_line_for_every_request_forwarded(hub, new_repo):
    # How the benchmarks count requests. Failed before: only the overviews the front answers itself were logged.
    repo_id, repo = new_repo("logged", "kernel")
    publish(repo, "1.0.0", variants=(CPU_213,))
    path = f"/api/kernels/{repo_id}/refs"
    assert request(f"{hub.endpoint}{path}")[0] == 200
    missing = f"/kernels/{repo_id}/resolve/v1.0.0/build/{CPU_213}/missing.py"
    status = request(f"{hub.endpoint}{missing}")[0]
    assert status >= 400
    lines = (hub.root / "front.log").read_text().splitlines()
    assert any(line.startswith(f"front: GET {path} ") and line.endswith(" 200 -") for line in lines)
    assert any(line.startswith(f"front: GET {missing} ") and line.endswith(f" {status} -") for line in lines)


def test_the_servers_report_the_cpu_they_used(hub):
    # What the bulk benchmark records of a cold sync: the test Hub's share of the machine, by process.
    before = hub.cpu_seconds_by_process()
    assert set(before) == {"olah", "olah-kernels", "front"} and all(used >= 0 for used in before.values())
    for _ in range(2000):  # until the front's CPU time moves on by a clock tick
        urllib.request.urlopen(hub.endpoint + "/api/organizations/acme/overview", timeout=10).read()
        if hub.cpu_seconds_by_process()["front"] > before["front"]:
            break
    after = hub.cpu_seconds_by_process()
    assert after["front"] > before["front"] and after["olah"] >= before["olah"]
    assert hub.cpu_seconds() == pytest.approx(sum(after.values()), abs=1.0)  # the whole test Hub's


def test_with_a_cdn_a_file_at_a_commit_is_answered_again_as_olah_answered_it(tmp_path):
    """HubServer(cdn=True) (the benchmarks' Hub): a GET or HEAD of a file at a commit is answered from the
    front's copy of olah's first answer, byte for byte (status line, headers, body), also with olah gone; a
    branch's path, a Range request and an error are always olah's."""
    import signal

    from testkit.hub import HubServer

    server = HubServer(tmp_path / "hub", cdn=True)
    repo = server.repo("acme/k", "kernel")
    repo.write({"build/x/lib.so": os.urandom(3 << 20), "build/x/a.py": b"A = 1\n"})
    commit = repo.commit("one")
    with server:
        base = f"{server.endpoint}/kernels/acme/k/resolve"
        first = {
            (method, path): request(f"{base}/{commit}/build/x/{path}", method)
            for method in ("GET", "HEAD")
            for path in ("lib.so", "a.py")
        }
        assert all(answer[0] == 200 for answer in first.values())
        assert request(f"{base}/{commit}/build/x/missing.py")[0] != 200  # olah: 500
        ranged = urllib.request.Request(f"{base}/{commit}/build/x/a.py", headers={"Range": "bytes=0-2"})
        with urllib.request.urlopen(ranged, timeout=30) as reply:  # olah's answer (it ignores Range): not kept
            assert reply.read().startswith(b"A =")
        os.killpg(server._named["olah-kernels"].pid, signal.SIGKILL)  # from now on only the front can answer
        for (method, path), answer in first.items():
            again = request(f"{base}/{commit}/build/x/{path}", method)
            assert again[0] == answer[0] and again[2] == answer[2], (method, path)
            assert {k: v for k, v in again[1].items() if k != "date"} == {
                k: v for k, v in answer[1].items() if k != "date"
            }, (method, path)
        for path in ("main/build/x/a.py", f"{commit}/build/x/missing.py"):  # olah's to answer, and it is gone
            with pytest.raises(OSError):
                request(f"{base}/{path}")
        with pytest.raises(OSError):
            urllib.request.urlopen(ranged, timeout=30)
