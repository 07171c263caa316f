"""A small HTTP server on 127.0.0.1 for fetch tests, able to misbehave on purpose.

It serves a directory (and/or in-memory files) on a free port from a background thread, records
every requested path, and can be told, per path, to answer 404, to fail with 5xx a number of
times before succeeding, to cut the body short, to serve wrong bytes, to be slow, to send the body
without a Content-Length, to trickle it (or its status line and headers) a byte at a time, or
to redirect elsewhere. It stops when
its context ends, and in any case after `max_lifetime` seconds, so a test can never leave it
running.
"""

from __future__ import annotations

import http.server
import threading
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

FaultKind = Literal[
    "not_found",
    "fail_then_ok",
    "truncate",
    "corrupt",
    "slow",
    "stall",
    "unannounced",
    "drip",
    "header_drip",
    "redirect",
]


@dataclass
class Fault:
    kind: FaultKind
    failures: int = 0  # fail_then_ok: how many failing answers come first
    status: int = 500  # fail_then_ok: the failing status
    keep_bytes: int = 0  # truncate / unannounced: bytes sent before the connection is closed
    # slow: delay before answering; stall: pause after half the body; drip, header_drip: between bytes
    seconds: float = 0.0
    location: str = ""  # redirect: where the 302 points
    served: int = 0  # how many failing answers were given so far


class DataServer:
    """Serve `root` and `files` at http://127.0.0.1:<port>/; use as a context manager."""

    def __init__(
        self, root: Path | None = None, *, files: dict[str, bytes] | None = None, max_lifetime: float = 120.0
    ) -> None:
        self.root = Path(root).resolve() if root is not None else None
        self.files: dict[str, bytes] = {self._key(k): v for k, v in (files or {}).items()}
        self.faults: dict[str, Fault] = {}
        self.requests: list[str] = []
        self._lock = threading.Lock()
        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._timer = threading.Timer(max_lifetime, self.stop)
        self._timer.daemon = True
        self._stopped = False

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> DataServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._thread.start()
        self._timer.start()

    def stop(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._timer.cancel()
        self._httpd.shutdown()
        self._httpd.server_close()

    # -- configuration -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def url_for(self, path: str) -> str:
        return f"{self.url}/{urllib.parse.quote(path.lstrip('/'))}"

    def add_file(self, path: str, data: bytes) -> str:
        self.files[self._key(path)] = data
        return self.url_for(path)

    def not_found(self, path: str) -> None:
        self.faults[self._key(path)] = Fault("not_found")

    def fail_then_ok(self, path: str, failures: int, status: int = 500) -> None:
        self.faults[self._key(path)] = Fault("fail_then_ok", failures=failures, status=status)

    def truncate(self, path: str, keep_bytes: int) -> None:
        self.faults[self._key(path)] = Fault("truncate", keep_bytes=keep_bytes)

    def corrupt(self, path: str) -> None:
        self.faults[self._key(path)] = Fault("corrupt")

    def slow(self, path: str, seconds: float) -> None:
        self.faults[self._key(path)] = Fault("slow", seconds=seconds)

    def stall(self, path: str, seconds: float) -> None:
        self.faults[self._key(path)] = Fault("stall", seconds=seconds)

    def unannounced(self, path: str, keep_bytes: int | None = None) -> None:
        """Send the body (its first `keep_bytes` only, when given) with no Content-Length, then close."""
        self.faults[self._key(path)] = Fault("unannounced", keep_bytes=-1 if keep_bytes is None else keep_bytes)

    def drip(self, path: str, seconds: float) -> None:
        """Announce the whole length, then send one byte every `seconds`."""
        self.faults[self._key(path)] = Fault("drip", seconds=seconds)

    def header_drip(self, path: str, seconds: float) -> None:
        """Send the status line and headers one byte every `seconds` (then the body at once)."""
        self.faults[self._key(path)] = Fault("header_drip", seconds=seconds)

    def redirect(self, path: str, location: str) -> None:
        self.faults[self._key(path)] = Fault("redirect", location=location)

    def requested(self, path: str) -> int:
        """How many times `path` was asked for."""
        key = self._key(path)
        return sum(1 for p in self.requests if p == key)

    # -- serving -----------------------------------------------------------------------------

    @staticmethod
    def _key(path: str) -> str:
        return "/" + urllib.parse.unquote(path).lstrip("/")

    def _content(self, key: str) -> bytes | None:
        if key in self.files:
            return self.files[key]
        if self.root is None:
            return None
        candidate = (self.root / key.lstrip("/")).resolve()
        if not candidate.is_relative_to(self.root) or not candidate.is_file():
            return None
        return candidate.read_bytes()

    def _handler_class(self) -> type[http.server.BaseHTTPRequestHandler]:
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (stdlib name)
                pass

            def do_GET(self) -> None:  # noqa: N802 (stdlib name)
                key = server._key(urllib.parse.urlsplit(self.path).path)
                with server._lock:
                    server.requests.append(key)
                try:
                    server._answer(self, key)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler

    def _answer(self, handler: http.server.BaseHTTPRequestHandler, key: str) -> None:
        fault = self.faults.get(key)
        body = self._content(key)
        if fault is not None and fault.kind == "slow":
            time.sleep(fault.seconds)
        if fault is not None and fault.kind == "redirect":
            self._redirect(handler, fault.location)
            return
        if fault is not None and fault.kind == "fail_then_ok" and fault.served < fault.failures:
            fault.served += 1
            self._status(handler, fault.status)
            return
        if body is None or (fault is not None and fault.kind == "not_found"):
            self._status(handler, 404)
            return
        if fault is not None and fault.kind == "corrupt":
            body = bytes(b ^ 0x5A for b in body)
        if fault is not None and fault.kind == "header_drip":
            self._drip_headers(handler, body, fault.seconds)
            return
        self._send(handler, body, fault)

    def _drip_headers(self, handler: http.server.BaseHTTPRequestHandler, body: bytes, seconds: float) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\nX-Padding: {'.' * 64}\r\n\r\n".encode()
        handler.close_connection = True
        for index in range(len(head)):
            if self._stopped:
                return
            handler.wfile.write(head[index : index + 1])
            handler.wfile.flush()
            time.sleep(seconds)
        handler.wfile.write(body)

    @staticmethod
    def _status(handler: http.server.BaseHTTPRequestHandler, code: int) -> None:
        message = f"status {code}\n".encode()
        handler.send_response(code)
        handler.send_header("Content-Length", str(len(message)))
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(message)
        handler.close_connection = True

    @staticmethod
    def _redirect(handler: http.server.BaseHTTPRequestHandler, location: str) -> None:
        handler.send_response(302)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True

    @staticmethod
    def _send(handler: http.server.BaseHTTPRequestHandler, body: bytes, fault: Fault | None) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        if fault is None or fault.kind != "unannounced":
            handler.send_header("Content-Length", str(len(body)))
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True
        if fault is not None and fault.kind == "unannounced":
            handler.wfile.write(body if fault.keep_bytes < 0 else body[: fault.keep_bytes])
            handler.wfile.flush()
            return
        if fault is not None and fault.kind == "drip":
            for index in range(len(body)):
                handler.wfile.write(body[index : index + 1])
                handler.wfile.flush()
                time.sleep(fault.seconds)
            return
        if fault is not None and fault.kind == "truncate":
            handler.wfile.write(body[: fault.keep_bytes])
            handler.wfile.flush()
            return
        if fault is not None and fault.kind == "stall":
            half = len(body) // 2
            handler.wfile.write(body[:half])
            handler.wfile.flush()
            time.sleep(fault.seconds)
            handler.wfile.write(body[half:])
            return
        handler.wfile.write(body)


def bypass_proxies(monkeypatch: object) -> None:
    """Make urllib talk to 127.0.0.1 directly even when a proxy is configured in the environment."""
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(name, "127.0.0.1,localhost")  # type: ignore[attr-defined]


def shared_datasets_dir() -> Path | None:
    """The offline copies of the real dataset files, if this checkout has them.

    $TABREPRO_SHARED_DATASETS wins; otherwise <repo>/../shared/datasets. None when absent.
    """
    import os

    configured = os.environ.get("TABREPRO_SHARED_DATASETS")
    path = Path(configured) if configured else Path(__file__).resolve().parents[2] / "shared" / "datasets"
    return path if (path / "SHA256SUMS").is_file() else None
