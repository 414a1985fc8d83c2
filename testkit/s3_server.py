"""A real S3 API on 127.0.0.1 for the conda channel tests: moto's server (PyPI `moto[server]`), in its own process,
with a public-read bucket as a conda channel bucket is; and a front that forwards to it but fails chosen requests,
as a server or network failing in the middle of a publish does.

    with S3Server(tmp_path) as s3:                  # moto_server on a free port; stopped (killed) at the end
        s3.create_public_bucket("conda")
        s3.endpoint                                 # http://127.0.0.1:PORT, for boto3's endpoint_url
        s3.public_url("conda", "img2gray")          # http://127.0.0.1:PORT/conda/img2gray: what consumers add
    with Front(s3.endpoint, lambda method, path: 500 if method == "PUT" and path.endswith("repodata.json") else None) as url:
        ...                                         # the same S3 API, each PUT of a repodata.json answered 500
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

from testkit.hub import free_port

ACCESS_KEY, SECRET_KEY, REGION = "testing", "testing", "us-east-1"  # moto accepts any; boto3 wants some


def _moto_server() -> str:
    beside_python = Path(sys.executable).with_name("moto_server")
    if not beside_python.exists():
        raise RuntimeError("moto_server not found beside this python: pip install 'moto[server]'")
    return str(beside_python)


class S3Server:
    """moto's S3 server in its own process group (stopped by killing it, as a crash would)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port: int | None = None
        self._process: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        if self.port is None:
            raise RuntimeError("the S3 server is not running")
        return f"http://127.0.0.1:{self.port}"

    def client(self, endpoint: str | None = None) -> Any:  # a boto3 S3 client (no importable type)
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=endpoint or self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
            config=Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 2, "mode": "standard"}),
        )

    def create_public_bucket(self, bucket: str) -> None:
        """A bucket everyone may read (GET), as a channel served over plain HTTPS is; writes need credentials."""
        client = self.client()
        client.create_bucket(Bucket=bucket)
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/*"}
            ],
        }
        client.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))

    def public_url(self, bucket: str, prefix: str) -> str:
        return f"{self.endpoint}/{bucket}/{prefix}"

    def start(self, timeout: float = 30.0) -> str:
        self.port = free_port()
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / "moto.log", "ab") as log:
            self._process = subprocess.Popen(
                [_moto_server(), "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"moto_server exited at its start (status {self._process.returncode}); log: {self.root / 'moto.log'}"
                )
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1):
                    return self.endpoint
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto_server did not answer on {self.endpoint} within {timeout}s; log: {self.root}")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
        self._process = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Front:
    """Forwards every request to `upstream` unchanged, after asking `intercept(method, path)`: a status it returns
    is answered instead, without forwarding (the server failed before storing anything); None forwards. The
    callback may also act first (another publisher's write, just before this one). Records what it refused."""

    def __init__(self, upstream: str, intercept: Callable[[str, str], int | None]) -> None:
        self.refused: list[tuple[str, str]] = []
        front = self
        target = urlsplit(upstream)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status = intercept(self.command, self.path)
                if status is not None:
                    front.refused.append((self.command, self.path))
                    message = b"<Error><Code>InternalError</Code><Message>injected failure</Message></Error>"
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(message)))
                    self.end_headers()
                    self.wfile.write(message)
                    return
                connection = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=30)
                headers = {key: value for key, value in self.headers.items() if key.lower() != "host"}
                headers["Host"] = target.netloc
                connection.request(self.command, self.path, body=body, headers=headers)
                answer = connection.getresponse()
                payload = answer.read()
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)
                connection.close()

            do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _relay

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    def __enter__(self) -> str:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
