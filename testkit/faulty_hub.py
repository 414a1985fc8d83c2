"""Hubs that misbehave, for tests of timeouts and error reports: one that accepts connections and never
answers, one that answers every request with a fixed HTTP status. Both listen on 127.0.0.1 in a thread.

    with SilentServer() as endpoint: ...                 # e.g. http://127.0.0.1:41234
    with StatusServer(503) as endpoint: ...
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class SilentServer:
    """Accepts TCP connections and never sends a byte (a hung server or a black-holing proxy)."""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._connections: list[socket.socket] = []
        self._closed = threading.Event()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self._connections.append(connection)  # held open, never read or answered

    def __enter__(self) -> str:
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()
        return f"http://127.0.0.1:{self._socket.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self._closed.set()
        self._socket.close()
        for connection in self._connections:
            connection.close()


class StatusServer:
    """Answers every request with `status` (and `headers`), as a failing Hub or proxy would."""

    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        status_, headers_ = status, headers or {}

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                body = b"" if self.command == "HEAD" else f'{{"error": "status {status_}"}}'.encode()
                self.send_response(status_)
                for name, value in headers_.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_HEAD = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True

    def __enter__(self) -> str:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
