"""A real simple-repository index on loopback for the harvester's tests.

Serves PEP 503 HTML or PEP 691 JSON project pages (chosen by the Accept header, with ETag
revalidation), PEP 658 ``.metadata`` files, and files with HTTP Range support. Faults can be
queued per path: ``"500"``, ``"503-retry-after"``, ``"sleep:SECONDS"``, ``"truncate"`` (the
connection drops after half the body), ``"cut:FRACTION"`` (a complete answer, Content-Length
and all, holding only the first FRACTION of the body and no ETag: a page cut off by a proxy).

Lasting misbehaviour, set on :class:`IndexState`:

* ``raw[path] = (status, body, headers)``: a canned answer for that path (a proxy's login page,
  a captive portal's 302, a text/plain page, a PEP 691 document of the wrong shape);
* ``substitute[path] = bytes``: other bytes served for a file or ``.metadata`` path, Range
  requests included, while the page keeps listing the real file's sha256 (a tampered mirror);
* ``html_only = True``: PEP 503 HTML pages even to clients that prefer JSON;
* ``gates[path] = Gate()``: that path is answered only once the test opens the gate
  (``gate.arrived`` tells it a client is waiting): a run held at a known point, no sleeps.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


@dataclass
class Served:
    filename: str
    data: bytes
    metadata: bytes | None = None  # served at <file>.metadata when set
    advertise_metadata: bool = False
    requires_python: str | None = None
    upload_time: str = "2024-10-29T16:00:00.000000Z"
    yanked: str | None = None  # PEP 592: the reason ("" for none given); None: not yanked

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass
class Gate:
    """A path held back: ``arrived`` is set when a client asks for it; the answer waits
    until ``opened`` is set (at most ``limit`` seconds)."""

    arrived: threading.Event = field(default_factory=threading.Event)
    opened: threading.Event = field(default_factory=threading.Event)
    limit: float = 120.0


class IndexState:
    def __init__(self) -> None:
        self.projects: dict[str, list[Served]] = defaultdict(list)  # "/simple/torch/" -> files
        self.relative: set[str] = set()  # page paths whose hrefs are relative (PyTorch style)
        self.files: dict[str, Served] = {}  # path -> file
        self.faults: dict[str, list[str]] = defaultdict(list)
        self.delay = 0.0  # seconds before every answer
        self.range_supported = True
        self.log: list[tuple[str, dict[str, str]]] = []
        self.raw: dict[str, tuple[int, bytes, dict[str, str]]] = {}  # path -> canned answer
        self.substitute: dict[str, bytes] = {}  # path -> bytes served instead of the real ones
        self.html_only = False
        self.gates: dict[str, Gate] = {}
        self.lock = threading.Lock()

    def add(self, page: str, served: Served, files_dir: str = "/files/") -> None:
        self.projects[page].append(served)
        self.files[files_dir + served.filename] = served


def _page_body(state: IndexState, page: str, host: str, want_json: bool) -> tuple[bytes, str]:
    files = state.projects[page]
    entries = []
    for f in sorted(files, key=lambda f: f.filename):
        path = next(p for p, s in state.files.items() if s is f)
        if page in state.relative:  # like download.pytorch.org: ../../whl/cu121/<file>
            depth = page.strip("/").count("/") + 1
            href = "../" * depth + path.lstrip("/").replace("+", "%2B")
        else:
            href = f"http://{host}{path}"
        entries.append((f, href))
    if want_json:
        doc = {
            "meta": {"api-version": "1.1"},
            "name": page.strip("/").split("/")[-1],
            "files": [
                {
                    "filename": f.filename,
                    "url": href,
                    "hashes": {"sha256": f.sha256},
                    "requires-python": f.requires_python,
                    "upload-time": f.upload_time,
                    "yanked": (f.yanked or True) if f.yanked is not None else False,
                    "core-metadata": {"sha256": hashlib.sha256(f.metadata).hexdigest()}
                    if f.advertise_metadata and f.metadata
                    else False,
                }
                for f, href in entries
            ],
        }
        return json.dumps(doc).encode(), "application/vnd.pypi.simple.v1+json"
    lines = ["<!DOCTYPE html><html><body><h1>Links</h1>"]
    for f, href in entries:
        attrs = f' data-upload-time="{f.upload_time}"'
        if f.requires_python:
            attrs += f' data-requires-python="{html.escape(f.requires_python)}"'
        if f.yanked is not None:
            attrs += f' data-yanked="{html.escape(f.yanked)}"'
        if f.advertise_metadata and f.metadata:
            attrs += f' data-dist-info-metadata="sha256={hashlib.sha256(f.metadata).hexdigest()}"'
        lines.append(
            f'<a href="{href}#sha256={f.sha256}"{attrs}>{html.escape(f.filename)}</a><br/>'
        )
    lines.append("</body></html>")
    return "\n".join(lines).encode(), "text/html"


def make_handler(state: IndexState):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _send(
            self,
            status: int,
            body: bytes = b"",
            headers: dict[str, str] | None = None,
            length: int | None = None,
        ) -> None:
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body) if length is None else length))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            path = unquote(urlsplit(self.path).path)
            with state.lock:
                state.log.append((path, dict(self.headers)))
                fault = state.faults[path].pop(0) if state.faults.get(path) else None
                gate = state.gates.get(path)
            if gate is not None:
                gate.arrived.set()
                gate.opened.wait(gate.limit)
            if state.delay:
                time.sleep(state.delay)
            if fault and fault.startswith("sleep:"):
                time.sleep(float(fault.split(":")[1]))
            elif fault == "500":
                return self._send(500, b"boom")
            elif fault == "503-retry-after":
                return self._send(503, b"busy", {"Retry-After": "0"})
            if path in state.raw:
                status, raw_body, raw_headers = state.raw[path]
                return self._send(status, raw_body, raw_headers)
            body, ctype, extra = self._resolve(path)
            if body is None:
                return self._send(404, b"not found")
            if fault == "truncate":
                self._send(200, body[: len(body) // 2], {"Content-Type": ctype}, length=len(body))
                self.close_connection = True
                return
            if fault and fault.startswith("cut:"):
                cut = body[: int(len(body) * float(fault.split(":")[1]))]
                return self._send(200, cut, {"Content-Type": ctype})
            rng = self.headers.get("Range")
            if rng and state.range_supported and path in state.files:
                m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng)
                size = len(body)
                if m and m[1] == "":
                    start, end = max(0, size - int(m[2])), size - 1
                else:
                    start, end = int(m[1]), min(int(m[2]) if m[2] else size - 1, size - 1)
                return self._send(
                    206,
                    body[start : end + 1],
                    {"Content-Type": ctype, "Content-Range": f"bytes {start}-{end}/{size}"},
                )
            if extra.get("ETag") and self.headers.get("If-None-Match") == extra["ETag"]:
                return self._send(304, b"", extra)
            self._send(200, body, {"Content-Type": ctype, **extra})

        def _resolve(self, path: str):
            if path in state.projects:
                accept = self.headers.get("Accept", "")
                want_json = (
                    "application/vnd.pypi.simple.v1+json" in accept.split(",")[0]
                    and not state.html_only
                )
                body, ctype = _page_body(state, path, self.headers["Host"], want_json)
                return body, ctype, {"ETag": '"' + hashlib.sha256(body).hexdigest()[:16] + '"'}
            if path in state.files:
                return (
                    state.substitute.get(path, state.files[path].data),
                    "application/octet-stream",
                    {"Accept-Ranges": "bytes"},
                )
            if path.endswith(".metadata") and path[: -len(".metadata")] in state.files:
                meta = state.files[path[: -len(".metadata")]].metadata
                if meta is not None:
                    return state.substitute.get(path, meta), "application/octet-stream", {}
            return None, "", {}

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass  # clients hanging up (timeouts, kills) are part of the tests


class IndexServer:
    def __init__(self) -> None:
        self.state = IndexState()
        self.httpd = _Server(("127.0.0.1", 0), make_handler(self.state))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> IndexServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()
