"""images/with-ca.sh, the builder's way of trusting a proxy's CA for one command: against a
real HTTPS server on loopback whose certificate only a throwaway CA (trustme) signed, the
command reaches it with the CA given as the secret and fails without; the bundle it made is
gone afterwards, whatever the command's exit."""

from __future__ import annotations

import http.server
import os
import ssl
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from envgen.image.render import templates_dir

trustme = pytest.importorskip("trustme")
pytestmark = pytest.mark.integration

SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
# what pip, requests and OpenSSL would each use: print the page and the bundle's path
FETCH = """
import os, sys, urllib.request
import requests
url = sys.argv[1]
body = urllib.request.urlopen(url, timeout=10).read().decode()
assert requests.get(url, timeout=10).text == body
print(body, os.environ["SSL_CERT_FILE"], os.environ["PIP_CERT"], sep="\\n")
"""


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello through the proxy's CA"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def tls_server():
    ca = trustme.CA()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield ca, f"https://127.0.0.1:{server.server_address[1]}/simple/"
    server.shutdown()
    server.server_close()


def _run(tmp_path: Path, secret: Path, *command: str) -> subprocess.CompletedProcess:
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    env = {**os.environ, "ENVGEN_CA_SECRET": str(secret), "TMPDIR": str(scratch)}
    for key in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        env.pop(key, None)
    if Path(SYSTEM_BUNDLE).is_file():
        env["SSL_CERT_FILE"] = SYSTEM_BUNDLE
    return subprocess.run(["sh", str(templates_dir() / "with-ca.sh"), *command],
                          capture_output=True, text=True, env=env, timeout=60)


def test_the_secret_ca_is_trusted_for_the_command_and_its_bundle_removed(tls_server, tmp_path):
    ca, url = tls_server
    secret = tmp_path / "envgen-ca"
    ca.cert_pem.write_to_path(str(secret))
    proc = _run(tmp_path, secret, sys.executable, "-c", FETCH, url)
    assert proc.returncode == 0, proc.stderr
    body, bundle, pip_cert = proc.stdout.splitlines()
    assert body == "hello through the proxy's CA"
    assert bundle == pip_cert and Path(bundle).parent == tmp_path / "tmp"
    assert not Path(bundle).exists()  # removed when the command ended
    assert list((tmp_path / "tmp").iterdir()) == []


def test_without_the_secret_the_command_runs_unchanged_and_fails_tls(tls_server, tmp_path):
    _, url = tls_server
    proc = _run(tmp_path, tmp_path / "no-such-secret", sys.executable, "-c", FETCH, url)
    assert proc.returncode != 0
    assert "CERTIFICATE_VERIFY_FAILED" in proc.stderr


def test_a_failing_command_keeps_its_exit_code_and_leaves_no_bundle(tls_server, tmp_path):
    ca, _ = tls_server
    secret = tmp_path / "envgen-ca"
    ca.cert_pem.write_to_path(str(secret))
    proc = _run(tmp_path, secret, "sh", "-c", 'test -s "$PIP_CERT" && exit 7')
    assert proc.returncode == 7
    assert list((tmp_path / "tmp").iterdir()) == []
