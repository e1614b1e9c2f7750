"""A ccache carried between builds of the classic builder (``--engine sdk``), in no layer.

The classic builder has no cache mounts: whatever a RUN step writes is in its layer, and
nothing it wrote in one build is there in the next. ccache (4.4 and newer) can keep its
objects in *remote storage* over HTTP instead (GET/HEAD to read, PUT to store: the ccache
manual, "Remote storage backends", and https://github.com/ccache/ccache/wiki/HTTP-storage).
So for the length of a build envgen serves a directory of the user's cache
(``<cache>/ccache/objects``) on the Docker bridge's gateway address, and the ops step runs
ccache with ``remote_only`` (no local objects, no stats: nothing lands in the layer):

- the build arg ``ENVGEN_CCACHE`` is ``http://envgen-ccache:<port>/<token>`` and the build's
  containers resolve ``envgen-ccache`` to the gateway (``extra_hosts``). The value is the same
  every build (the port is fixed, the token is the user's), because the classic builder keys a
  RUN step's cache on its build args: a changing value would re-run the ops step every time.
  It is not in the content hash (it changes nothing in the image);
- the token (random, kept 0600 in the cache directory) is the first part of every path: other
  containers on the bridge cannot read or poison the objects without it;
- objects are written whole (a temporary file, then a rename) and touched on each hit; after
  the build the least recently used go while the store is over its limit (ccache's own
  default max_size, 5 GB; ``ENVGEN_CCACHE_MAX_GB``);
- a second envgen build while one runs finds the port taken by a store of the same directory
  and uses it — once the listener has proved it holds the token (it answers a fresh nonce with
  the token's HMAC; the token is never sent to it); anything else on the port, or no such
  address here (a remote daemon, rootless Docker), means a build without ccache, said in the
  log;
- a PUT is streamed to a temporary file and stored only when all its bytes came; at most 64
  connections are served at once.

Hand-written (a few HTTP verbs over one directory; a WebDAV server would be a large dependency
for it). Input: the docker client and the build's network. Output: the build arg, the host
entry and, after the build, the hits, misses and objects stored.
"""

from __future__ import annotations

import contextlib
import errno
import http.server
import os
import re
import secrets
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

HOST_NAME = "envgen-ccache"  # what the build's containers resolve to the gateway
DEFAULT_PORT = 47311  # fixed, see the module docstring; ENVGEN_CCACHE_PORT overrides it
DEFAULT_MAX_GB = 5.0  # ccache's own default max_size
BUILD_ARG = "ENVGEN_CCACHE"
_KEY = re.compile(r"^[0-9a-z]{1,128}(/[0-9a-z]{1,128}){0,2}$")  # ccache's flat/subdirs layouts
_PROBE = "/.envgen-proof/"  # GET /.envgen-proof/<nonce>: HMAC(token, nonce, directory)
_MAX_OBJECT = 1 << 30
_CHUNK = 1 << 20
_MAX_CONNECTIONS = 64


@dataclass
class Counts:
    hits: int = 0
    misses: int = 0
    stored: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, name: str) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + 1)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # ccache keeps its connection open

    def log_message(self, format: str, *args) -> None:
        return

    def _object(self) -> Path | None:
        """The file a request names, or None after answering 403/400 (wrong token, a key
        that is not ccache's)."""
        prefix = f"/{self.server.token}/"
        if not self.path.startswith(prefix):
            self._answer(403)
            return None
        key = self.path[len(prefix):]
        if not _KEY.match(key):
            self._answer(400)
            return None
        return self.server.root / key

    def _answer(self, status: int, body: bytes = b"") -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith(_PROBE):  # another envgen asks: prove the token, never send it
            nonce = self.path[len(_PROBE):]
            if not re.fullmatch(r"[0-9a-f]{32}", nonce):
                self._answer(400)
                return
            self._answer(200, proof(self.server.token, nonce, self.server.root).encode())
            return
        path = self._object()
        if path is None:
            return
        try:
            data = path.read_bytes()
        except OSError:
            self.server.counts.add("misses")
            self._answer(404)
            return
        with contextlib.suppress(OSError):
            os.utime(path)  # used: the last to go when the store is trimmed
        self.server.counts.add("hits")
        self._answer(200, data)

    def do_HEAD(self) -> None:
        path = self._object()
        if path is not None:
            self._answer(200 if path.is_file() else 404)

    def do_PUT(self) -> None:
        path = self._object()
        if path is None:
            return
        try:
            size = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._answer(411)
            return
        if size < 0 or size > _MAX_OBJECT:
            self._answer(413 if size > _MAX_OBJECT else 400)
            return
        tmp = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
        try:  # streamed to disk (bounded memory); stored only when all of it came
            path.parent.mkdir(parents=True, exist_ok=True)
            got = 0
            with tmp.open("wb") as out:
                while got < size:
                    chunk = self.rfile.read(min(_CHUNK, size - got))
                    if not chunk:
                        break
                    out.write(chunk)
                    got += len(chunk)
            if got != size:  # the client went away: nothing half-written is kept
                tmp.unlink(missing_ok=True)
                self.close_connection = True
                return
            os.replace(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)
            self._answer(507)
            return
        self.server.counts.add("stored")
        self._answer(201)

    def do_DELETE(self) -> None:
        path = self._object()
        if path is None:
            return
        try:
            path.unlink()
        except OSError:
            self._answer(404)
            return
        self._answer(204)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], root: Path, token: str) -> None:
        self.root, self.token, self.counts = root, token, Counts()
        self.slots = threading.BoundedSemaphore(_MAX_CONNECTIONS)
        super().__init__(address, _Handler)

    def process_request(self, request, client_address) -> None:
        """At most _MAX_CONNECTIONS at once (ccache opens a few; anything more is not it)."""
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request, client_address) -> None:
        """A client that went away mid-answer (ccache killed with its build, a connection cut
        before a 507) is not the store's error: no traceback on the build's terminal. Anything
        else is reported as socketserver does."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


@dataclass(frozen=True)
class Store:
    """A running store as the build sees it: the build arg, the host entry and the counts
    (None when another envgen's store is shared; its build counts them)."""

    url: str
    gateway: str
    root: Path
    counts: Counts | None
    shared: bool = False

    @property
    def build_args(self) -> dict[str, str]:
        return {BUILD_ARG: self.url}

    @property
    def extra_hosts(self) -> dict[str, str]:
        return {HOST_NAME: self.gateway}

    def summary(self) -> dict:
        counts = self.counts
        return {"url": self.url.rsplit("/", 1)[0] + "/…", "directory": str(self.root),
                "shared": self.shared,
                **({"hits": counts.hits, "misses": counts.misses, "stored": counts.stored}
                   if counts else {})}


def cache_dir() -> Path:
    from envgen.config import cache_root

    return cache_root() / "ccache"


def token(directory: Path) -> str:
    """The user's token (made once, kept 0600 in ``directory``)."""
    path = directory / "token"
    try:
        found = path.read_text(encoding="ascii").strip()
        if re.fullmatch(r"[0-9a-f]{32}", found):
            return found
    except OSError:
        pass
    directory.mkdir(parents=True, exist_ok=True)
    made = secrets.token_hex(16)
    fd = os.open(f"{path}.{os.getpid()}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(made + "\n")
    os.replace(f"{path}.{os.getpid()}", path)
    return made


def port() -> int:
    value = os.environ.get("ENVGEN_CCACHE_PORT", "")
    return int(value) if value.isdigit() and 0 < int(value) < 65536 else DEFAULT_PORT


def max_bytes() -> int:
    try:
        gb = float(os.environ.get("ENVGEN_CCACHE_MAX_GB", DEFAULT_MAX_GB))
    except ValueError:
        gb = DEFAULT_MAX_GB
    return int(max(gb, 0.0) * 1e9)


def gateway(client, network: str | None) -> str | None:
    """The address the build's containers reach the host on: the gateway of the build's
    network (the default bridge for the default network and for ``host``)."""
    name = network if network and network not in ("host", "default", "bridge") else "bridge"
    try:
        configs = client.networks.get(name).attrs.get("IPAM", {}).get("Config") or []
    except Exception:  # docker errors: no such network, an old daemon
        return None
    return ipam_gateway(configs)


def ipam_gateway(configs: list[dict]) -> str | None:
    """The IPv4 gateway of a network's IPAM configs. A daemon restarted over an existing
    docker0 lists the default bridge's subnet without its gateway: the default IPAM driver
    gives the gateway the subnet's first address, so that is the answer then."""
    import ipaddress

    found = next((c["Gateway"] for c in configs
                  if c.get("Gateway") and ":" not in c["Gateway"]), None)
    if found is not None:
        return found
    subnet = next((c["Subnet"] for c in configs if c.get("Subnet") and ":" not in c["Subnet"]),
                  None)
    try:
        return str(next(ipaddress.ip_network(subnet).hosts())) if subnet else None
    except (ValueError, StopIteration):
        return None


@contextlib.contextmanager
def serving(address: str, directory: Path | None = None,
            listen_port: int | None = None) -> Iterator[Store | str]:
    """A store on ``address`` for the ``with`` block, or a sentence saying why there is none.
    Trims the store after the block."""
    directory = directory or cache_dir()
    listen_port = listen_port or port()
    root = directory / "objects"
    root.mkdir(parents=True, exist_ok=True)
    tok = token(directory)
    url = f"http://{HOST_NAME}:{listen_port}/{tok}"
    try:
        server = _Server((address, listen_port), root, tok)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE and _same_store(address, listen_port, tok, root):
            yield Store(url=url, gateway=address, root=root, counts=None, shared=True)
            return
        yield (f"cannot listen on {address}:{listen_port} ({exc.strerror or exc}): the ops "
               "compile without ccache; set ENVGEN_CCACHE_PORT to a free port, or use "
               "--engine buildkit (its cache mount)")
        return
    thread = threading.Thread(target=server.serve_forever, name="envgen-ccache", daemon=True)
    thread.start()
    try:
        yield Store(url=url, gateway=address, root=root, counts=server.counts)
    finally:
        server.shutdown()
        server.server_close()
        trim(root, max_bytes())


def proof(tok: str, nonce: str, root: Path) -> str:
    """What only a store holding the user's token for ``root`` can answer to ``nonce``."""
    import hashlib
    import hmac

    return hmac.new(tok.encode(), f"{nonce}\0{root}".encode(), hashlib.sha256).hexdigest()


def _same_store(address: str, listen_port: int, tok: str, root: Path) -> bool:
    """Whether what listens on the port is a store of this user's ``root``: it must answer a
    fresh nonce with the token's HMAC. The token itself is never sent to it."""
    import hmac
    import urllib.request

    nonce = secrets.token_hex(16)
    try:
        with urllib.request.urlopen(f"http://{address}:{listen_port}{_PROBE}{nonce}",
                                    timeout=2) as answer:
            got = answer.read(256).decode("ascii", "replace")
    except Exception:
        return False
    return hmac.compare_digest(got, proof(tok, nonce, root))


def trim(root: Path, limit: int) -> int:
    """Remove the least recently used objects while ``root`` holds more than ``limit`` bytes
    (down to 80% of it, as ccache's own cleanup); returns the bytes removed."""
    files = []
    total = 0
    for path in root.rglob("*"):
        with contextlib.suppress(OSError):
            st = path.stat()
            if path.is_file():
                files.append((st.st_mtime_ns, st.st_size, path))
                total += st.st_size
    removed = 0
    if total <= limit:
        return 0
    for _mtime, size, path in sorted(files):
        if total - removed <= limit * 0.8:
            break
        with contextlib.suppress(OSError):
            path.unlink()
            removed += size
    return removed
