"""kernelpin.hub.wire directly: kernelpin's own requests over http.client against hostile servers on 127.0.0.1 (the
suite's, and a few made here), each limit at its edge and each error with its message. The same limits and
messages as huggingface_hub's client held them (tests/kernelpin/hub/test_hubclient.py); through HubSource the
suite's Hub tests (test_deadline, test_throttling, test_hub_answers, the journeys) run over it as well."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kernelpin.hub.http_errors import HubHTTPError
from kernelpin.hub.limits import Budget, Interrupted, LimitExceeded, Limits
from kernelpin.hub.wire import MAX_REDIRECTS, HubTimeout, HubUnreachable, Wire
from tests.kernelpin.faulty_hub import STALLS, HostileHub, Lies, SilentServer, StatusServer

NOWHERE = "http://127.0.0.1:9"  # HostileHub's upstream when every answer is a lie (nothing is forwarded)
REFS = "/api/kernels/acme/x/refs"
FILE = "/kernels/acme/x/resolve/main/a.bin"
TOKEN = {"authorization": "Bearer hf_secret"}


def budget(**kwargs: float) -> Budget:
    return Budget(Limits(**kwargs))


def get(url: str, seconds: float = 5.0, expected: int | None = None, headers=None, within: Budget | None = None):
    """The body of `url` over a new Wire, and its answer."""
    body = bytearray()
    answer = Wire(seconds).get(url, headers or {}, within or budget(), body.extend, expected)
    return bytes(body), answer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the Hub

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def serving(answer, seen: list | None = None) -> Iterator[ThreadingHTTPServer]:
    """A keep-alive server on 127.0.0.1 whose GETs `answer(handler)` answers (each request's path and Authorization
    header go to `seen`), counting the connections it accepted in its `connections`."""

    class Handler(_Handler):
        def do_GET(self) -> None:
            if seen is not None:
                seen.append((self.path, self.headers.get("Authorization")))
            answer(self)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    accepted = server.get_request

    def counting():
        connection = accepted()
        server.connections += 1
        return connection

    server.connections = 0
    server.get_request = counting
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _endpoint(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def _body(handler: BaseHTTPRequestHandler, body: bytes, status: int = 200, **headers: str) -> None:
    handler.send_response(status)
    for name, value in headers.items():
        handler.send_header(name.replace("_", "-"), value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def test_a_silent_server_is_a_timeout_naming_the_wait_then_the_deadline():
    with SilentServer() as endpoint:
        with pytest.raises(
            HubTimeout,
            match="^"
            + re.escape(
                f"no answer from {endpoint}/x within 0.2 s (ReadTimeout); the server is down or overloaded: retry "
                "later, or set KERNELPIN_HTTP_TIMEOUT=SECONDS to wait longer"
            )
            + "$",
        ):
            get(endpoint + "/x?cursor=secret", seconds=0.2)
        started = time.monotonic()
        with pytest.raises(
            LimitExceeded,
            match="^"
            + re.escape(
                f"requesting {endpoint}/x: stopped at the 0.3 s deadline for one command (KERNELPIN_DEADLINE); the "
                "server is too slow or is stalling: retry later, or set KERNELPIN_DEADLINE=SECONDS to allow more"
            ),
        ):
            get(endpoint + "/x", seconds=30, within=budget(deadline=0.3))
        assert time.monotonic() - started < 5  # not the 30 s timeout: the deadline cuts the wait


def test_an_interrupted_budget_ends_a_wait_in_another_thread_within_a_slice_and_sends_nothing_more():
    # Failed before: a request waiting in a worker thread when Ctrl-C came waited out its timeout (30 s here).
    interrupted = budget()
    raised: list[BaseException] = []

    def waiting() -> None:
        try:
            get(endpoint + "/x", seconds=30, within=interrupted)
        except BaseException as error:  # noqa: BLE001 - examined below
            raised.append(error)

    with SilentServer() as endpoint:
        worker = threading.Thread(target=waiting)
        worker.start()
        time.sleep(0.5)  # the request is out, its answer awaited
        started = time.monotonic()
        interrupted.interrupt()
        worker.join(10)
        assert not worker.is_alive() and time.monotonic() - started < 5
    assert isinstance(raised[0], Interrupted) and "interrupted" in str(raised[0])
    with pytest.raises(Interrupted):  # a request of an interrupted command is not sent
        get("http://127.0.0.1:9/x", within=interrupted)


@pytest.mark.parametrize("lie", STALLS.values(), ids=STALLS)
def test_a_stalling_server_is_cut_off_at_the_deadline_whatever_it_stalls(lie):
    # Each byte comes well within the timeout: only the deadline stops these.
    deadline = 0.3 if lie.drip is None else 1
    with HostileHub(NOWHERE, lie) as endpoint, pytest.raises(LimitExceeded) as raised:
        get(endpoint + REFS, within=budget(deadline=deadline))
    doing = "requesting" if lie.drip is None else "receiving"
    assert str(raised.value).startswith(f"{doing} {endpoint}{REFS}: stopped at the {deadline:g} s deadline")


def test_a_deadline_already_passed_sends_no_request():
    seen: list = []
    spent = budget(deadline=1)
    spent.ends -= 1
    with (
        serving(lambda handler: _body(handler, b"{}"), seen) as server,
        pytest.raises(LimitExceeded, match=f"requesting {_endpoint(server)}/x: stopped"),
    ):
        get(_endpoint(server) + "/x?secret=1", within=spent)
    assert seen == []


def test_an_endless_body_is_cut_at_the_files_size_or_the_answer_limit():
    with HostileHub(NOWHERE, Lies(endless_file=True, endless_for=10)) as endpoint:
        with pytest.raises(
            LimitExceeded,
            match="^"
            + re.escape(
                f"{endpoint}{FILE}: the server sends more than the 1000 bytes the file has (as locked or listed); "
                "the download was stopped and nothing of it is kept. The server is broken or hostile"
            )
            + "$",
        ):
            get(endpoint + FILE, expected=1000)
        with pytest.raises(
            LimitExceeded,
            match=re.escape(f"{endpoint}{FILE}: the answer is longer than 5000 bytes (KERNELPIN_MAX_RESPONSE_BYTES)"),
        ):
            get(endpoint + FILE, within=budget(max_response_bytes=5000))


def test_a_body_announced_too_long_is_refused_before_it_is_read():
    with (
        HostileHub(NOWHERE, Lies(refs_announced=10**9)) as endpoint,
        pytest.raises(
            LimitExceeded,
            match=re.escape(
                f"{endpoint}{REFS}: the answer announces 1000000000 bytes, more than 1000 bytes "
                "(KERNELPIN_MAX_RESPONSE_BYTES); the server is broken or hostile. If the answer is genuine, set "
                "KERNELPIN_MAX_RESPONSE_BYTES=N to allow more"
            ),
        ),
    ):
        get(endpoint + REFS, within=budget(max_response_bytes=1000))
    with (
        HostileHub(NOWHERE, Lies(file_status=200)) as endpoint,
        pytest.raises(LimitExceeded, match="the server announces 2.. bytes, more than the 1 bytes the file has"),
    ):
        get(endpoint + FILE, expected=1)


def test_an_answer_exactly_at_its_limit_is_taken():
    with serving(lambda handler: _body(handler, b"x" * 100)) as server:
        assert get(_endpoint(server) + FILE, expected=100)[0] == b"x" * 100
        assert get(_endpoint(server) + REFS, within=budget(max_response_bytes=100))[0] == b"x" * 100


def test_answers_are_asked_for_uncompressed_and_a_compressed_one_is_refused():
    refs = {"tags": [], "branches": []}
    with (
        HostileHub(NOWHERE, Lies(refs=refs, gzip_refs=True)) as endpoint,
        pytest.raises(
            LimitExceeded,
            match=re.escape(
                f"{endpoint}{REFS}: the server compressed its answer (gzip) though kernelpin asked for none"
            ),
        ),
    ):
        get(endpoint + REFS)
    seen: list = []

    def echo(handler: BaseHTTPRequestHandler) -> None:
        seen.append(handler.headers.get("Accept-Encoding"))
        _body(handler, b"{}", Content_Encoding="")  # empty: no compression

    with serving(echo) as server:
        assert get(_endpoint(server) + REFS)[0] == b"{}"
    assert seen == ["identity"]


def _truncated(handler: BaseHTTPRequestHandler) -> None:
    """1000 bytes announced, 10 sent, the connection closed."""
    handler.send_response(200)
    handler.send_header("Content-Length", "1000")
    handler.end_headers()
    handler.wfile.write(b"x" * 10)
    handler.close_connection = True


def test_a_truncated_body_is_an_error_not_a_short_file():
    with serving(_truncated) as server, pytest.raises(HubUnreachable) as raised:
        get(_endpoint(server) + FILE, expected=1000)
    assert str(raised.value) == (
        "peer closed connection without sending complete message body (received 10 bytes, expected 1000)"
    )


def test_a_redirect_to_another_host_does_not_get_the_token():
    cdn_seen: list = []
    hub_seen: list = []
    with serving(lambda handler: _body(handler, b"file"), cdn_seen) as cdn:
        # The Hub sends a file to its CDN (another host: here another port, which is another origin too), and a
        # renamed repository to its new name on the same origin.
        def hub(handler: BaseHTTPRequestHandler) -> None:
            if handler.path.startswith("/old/"):
                _body(handler, b"", 307, Location=handler.path.replace("/old/", "/new/"))
            elif handler.path.startswith("/new/"):
                _body(handler, b"moved", 302, Location=f"{_endpoint(cdn)}/blob?signed=1")
            else:
                _body(handler, b"", 404)

        with serving(hub, hub_seen) as server:
            body, answer = get(_endpoint(server) + "/old/a.bin", headers=TOKEN)
    assert body == b"file" and answer.status == 200
    assert hub_seen == [("/old/a.bin", "Bearer hf_secret"), ("/new/a.bin", "Bearer hf_secret")]  # same origin
    assert cdn_seen == [("/blob?signed=1", None)]


def test_redirects_end_after_a_bound():
    seen: list = []
    with (
        serving(lambda handler: _body(handler, b"", 302, Location="/again"), seen) as server,
        pytest.raises(HubUnreachable, match=f"more than {MAX_REDIRECTS} redirects, the last to "),
    ):
        get(_endpoint(server) + "/again")
    assert len(seen) == MAX_REDIRECTS + 1


def test_a_redirect_to_no_http_url_is_refused():
    with (
        serving(lambda handler: _body(handler, b"", 302, Location="file:///etc/passwd")) as server,
        pytest.raises(HubUnreachable, match=re.escape("file:///etc/passwd is no http or https URL")),
    ):
        get(_endpoint(server) + "/x")


def test_too_many_requests_is_asked_again_after_the_wait_asked_for():
    lies = Lies(throttle=2, retry_after="1", refs={"tags": [], "branches": []})
    throttling = HostileHub(NOWHERE, lies)
    with throttling as endpoint:
        started = time.monotonic()
        assert get(endpoint + REFS)[0] == b'{"tags": [], "branches": []}'
        assert time.monotonic() - started >= 2  # two waits of the 1 s asked for
    assert throttling.requests == 3
    with (
        HostileHub(NOWHERE, Lies(throttle=1, retry_after="3600")) as endpoint,
        pytest.raises(LimitExceeded, match=r"throttling requests \(HTTP 429\) and asks to wait 3600 s"),
    ):
        get(endpoint + REFS, within=budget(deadline=60))


def test_a_wait_a_throttling_server_asked_for_ends_when_the_command_is_interrupted():
    # Failed before: a worker told to wait (429, Retry-After) slept it out after Ctrl-C: 30 s here, the deadline at most.
    interrupted = budget()
    raised: list[BaseException] = []

    def throttled() -> None:
        try:
            get(endpoint + REFS, within=interrupted)
        except BaseException as error:  # noqa: BLE001 - examined below
            raised.append(error)

    with HostileHub(NOWHERE, Lies(throttle=1, retry_after="30")) as endpoint:
        worker = threading.Thread(target=throttled)
        worker.start()
        time.sleep(0.5)  # the answer said wait
        started = time.monotonic()
        interrupted.interrupt()
        worker.join(10)
        assert not worker.is_alive() and time.monotonic() - started < 5
    assert isinstance(raised[0], Interrupted) and str(raised[0]).startswith(f"requesting {endpoint}{REFS}")


def test_an_error_answer_is_a_hub_http_error_worded_as_huggingface_hub_words_it():
    with StatusServer(404, {"X-Error-Code": "RepoNotFound"}) as endpoint, pytest.raises(HubHTTPError) as raised:
        get(endpoint + REFS)
    assert raised.value.status == 404 and raised.value.repository_missing
    assert str(raised.value).splitlines()[0] == "404 Client Error."
    with StatusServer(503) as endpoint, pytest.raises(HubHTTPError) as raised:
        get(endpoint + REFS)
    assert str(raised.value).splitlines()[0] == (f"Server error '503 Service Unavailable' for url '{endpoint}{REFS}'")


def test_a_refused_connection_is_unreachable_with_the_reason():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(HubUnreachable, match=re.escape("[Errno 111] Connection refused")):
        get(f"http://127.0.0.1:{port}/x")


def test_one_connection_carries_a_commands_requests_and_a_closed_one_is_replaced():
    with serving(lambda handler: _body(handler, b"{}")) as server:
        wire, within = Wire(5), budget()
        for _ in range(3):
            wire.get(_endpoint(server) + REFS, {}, within, lambda chunk: None)
        assert server.connections == 1

    # The server hangs up on a kept connection after its answer (its keep-alive timeout), without saying so: the
    # next request is sent again on a new connection, not reported as an error.
    def hang_up(handler: BaseHTTPRequestHandler) -> None:
        _body(handler, b"{}")
        handler.close_connection = True

    wire = Wire(5)
    with serving(hang_up) as closing:
        for _ in range(2):
            wire.get(_endpoint(closing) + REFS, {}, within, lambda chunk: None)
            time.sleep(0.1)
        assert closing.connections == 2


def test_control_characters_in_an_answers_headers_are_refused_before_they_reach_a_message():
    # An error page's X-Error-Message goes into the first line of kernelpin's message (as huggingface_hub words a
    # 403): an escape sequence there would act on the terminal it is printed to.
    with (
        StatusServer(403, {"X-Error-Message": "\x1b[2Jcleared"}) as endpoint,
        pytest.raises(HubUnreachable, match="status line or headers hold control characters") as raised,
    ):
        get(endpoint + REFS)
    assert "\x1b" not in str(raised.value)


def test_a_target_with_spaces_or_other_scripts_is_sent_percent_encoded():
    seen: list = []
    with serving(lambda handler: _body(handler, b"{}"), seen) as server:
        get(_endpoint(server) + "/kernels/acme/x/resolve/main/a b/é.py")
    assert seen == [("/kernels/acme/x/resolve/main/a%20b/%C3%A9.py", None)]


def test_through_the_hub_source_a_cut_off_or_refused_download_says_what_and_where(tmp_path):
    # kernelpin's message for each, as it was over huggingface_hub's client; the sink got no byte past the cut.
    from kernelpin.errors import KernelpinError
    from kernelpin.hub.source import HubSettings, HubSource

    commit = "0123456789abcdef0123456789abcdef01234567"

    with serving(_truncated) as server:
        source = HubSource(HubSettings.from_env({"HF_ENDPOINT": _endpoint(server), "HF_HOME": str(tmp_path)}))
        received = bytearray()
        with pytest.raises(KernelpinError) as raised:
            source.stream("acme/x", "kernel", commit, "build/a.so", 1000, received.extend)
    assert str(raised.value) == (
        f"downloading build/a.so of acme/x at {commit[:12]} failed: cannot reach {_endpoint(server)} (peer closed "
        "connection without sending complete message body (received 10 bytes, expected 1000)); check the network "
        "and HF_ENDPOINT, then re-run"
    )
    assert bytes(received) == b"x" * 10  # the store writes it to a temporary file it then discards
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{closed.getsockname()[1]}"
    source = HubSource(HubSettings.from_env({"HF_ENDPOINT": nowhere, "HF_HOME": str(tmp_path)}))
    with pytest.raises(KernelpinError) as raised:
        source.refs("acme/x", "kernel")
    assert str(raised.value) == (
        f"listing tags of acme/x failed: cannot reach {nowhere} ([Errno 111] Connection refused); check the network "
        "and HF_ENDPOINT, then re-run"
    )


def test_a_kept_connection_is_closed_when_its_wire_goes():
    import gc

    with serving(lambda handler: _body(handler, b"{}")) as server:
        wire = Wire(5)
        wire.get(_endpoint(server) + REFS, {}, budget(), lambda chunk: None)
        (kept,) = wire._idle[("http", "127.0.0.1", server.server_address[1])]
        raw = kept.sock.sock
        assert raw.fileno() != -1  # kept open for the command's next request
        del wire, kept
        gc.collect()
        assert raw.fileno() == -1
