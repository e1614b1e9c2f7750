"""Secrets and trust (issue 37): a secret planted in an index URL
(``http://alice:TOKEN@host/simple``) is used for the solve and written nowhere — no lock file,
header, Dockerfile, installed env, printed line or error (shown masked, as pip and uv mask it),
no layer of the built image; a listener squatting the ccache store's port never gets the
token; a cut-off upload is not stored; an edited lock is refused before it is read."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
from support.http_call import call
from support.run import HOST_PY, run_envgen

from envgen.image import ccache_store
from envgen.lock.secrets import public, public_text, shown, shown_text

SECRET = "s3cr3tTOKEN4fq9"
fault = pytest.mark.fault


def test_urls_lose_their_credentials_in_files_and_are_masked_on_screen():
    assert public("https://alice:TOK@h:8080/simple/") == "https://h:8080/simple/"
    assert public("https://TOK@h/simple") == "https://h/simple"
    assert public("https://conda.anaconda.org/t/tk-1/private") == \
        "https://conda.anaconda.org/private"
    assert public("https://h/simple") == "https://h/simple" and public("conda-forge") == \
        "conda-forge"
    assert shown("https://alice:TOK@h/simple") == "https://alice:****@h/simple"
    assert shown("https://TOK@h/simple") == "https://****@h/simple"  # a lone name may be a token
    assert shown("https://conda.anaconda.org/t/tk-1/private") == \
        "https://conda.anaconda.org/t/****/private"
    assert shown_text("cannot read http://u:p@h/x (and https://[::1]:9/y)") == \
        "cannot read http://u:****@h/x (and https://[::1]:9/y)"
    text = 'url = "http://alice:TOK@h:1/files/a.whl"\nindex = "http://alice:TOK@h:1/simple"'
    assert public_text(text, ["http://alice:TOK@h:1/simple"]) == \
        'url = "http://h:1/files/a.whl"\nindex = "http://h:1/simple"'


def _with_secret(make_args: list[str], wheel_index) -> list[str]:
    _, url = wheel_index
    args = list(make_args)
    args[args.index("--index-url") + 1] = url.replace("http://", f"http://alice:{SECRET}@")
    return args


def _leaks(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and not p.is_symlink() and SECRET.encode() in p.read_bytes())


@pytest.mark.integration
@pytest.mark.parametrize("flavor", [
    pytest.param("venv", marks=fault("S01", "a password in --index-url: venv lock, its image "
                                     "files, the env it installs, every line printed", exit=0)),
    pytest.param("conda", marks=fault("S02", "a password in --index-url: conda lock, the env "
                                      "it installs, every line printed", exit=0))])
def test_a_secret_in_the_index_url_is_in_no_lock_file_env_or_output(make_args, wheel_index,
                                                                   tmp_path, flavor):
    args = _with_secret(make_args, wheel_index)
    image = ["--image", "--gpu-arch", "sm_90"] if flavor == "venv" and HOST_PY == "3.11" else []
    made = run_envgen(*args, "--flavor", flavor, *image, "-v")
    assert made.returncode == 0, made.stderr
    assert SECRET not in made.stdout + made.stderr
    assert _leaks(tmp_path / "locks") == []
    (lock,) = (tmp_path / "locks").iterdir()
    manifest = json.loads((lock / "envgen.lock.json").read_text())
    assert manifest["pip"]["index_url"] == wheel_index[1]  # the same index, without the secret
    # the loopback index asks for no password: the public URL installs (a private one would
    # take its credentials from ~/.netrc or a keyring, as pip and uv do)
    installed = run_envgen("install", str(lock), "--prefix", str(tmp_path / "env"), "--json")
    assert installed.returncode == 0, installed.stderr
    assert SECRET not in installed.stdout + installed.stderr
    assert _leaks(tmp_path / "env") == []


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@fault("S03", "a private index that cannot be reached: named, its password not shown", exit=4)
@pytest.mark.integration
def test_an_unreachable_private_index_is_named_with_the_secret_masked(make_args, tmp_path):
    port = _dead_port()
    args = list(make_args)
    args[args.index("--index-url") + 1] = f"http://alice:{SECRET}@127.0.0.1:{port}/simple"
    for extra in ((), ("--json",)):
        proc = run_envgen(*args, "--flavor", "venv", *extra)
        assert proc.returncode == 4, proc.stderr
        assert SECRET not in proc.stdout + proc.stderr
        assert f"127.0.0.1:{port}/simple" in proc.stdout + proc.stderr  # named, all the same


@fault("S04", "a proxy's password in a build argument (build --dry-run, text and JSON)", exit=0)
@pytest.mark.integration
def test_build_dry_run_masks_a_proxys_credentials(make_args, tmp_path):
    if HOST_PY != "3.11":
        pytest.skip("the fixture's debian-12 base has bookworm's Python 3.11")
    made = run_envgen(*make_args, "--flavor", "venv", "--image", "--gpu-arch", "sm_90")
    assert made.returncode == 0, made.stderr
    (lock,) = (tmp_path / "locks").iterdir()
    proxy = f"HTTPS_PROXY=http://bob:{SECRET}@proxy.invalid:3128"
    for extra in ((), ("--json",)):
        proc = run_envgen("build", str(lock), "--dry-run", "--build-arg", proxy, *extra)
        assert proc.returncode == 0, proc.stderr
        assert SECRET not in proc.stdout and "bob:****@proxy.invalid" in proc.stdout


@fault("S05", "a password in --index-url: the built image's layers and history", exit=0)
@pytest.mark.integration
@pytest.mark.docker
def test_no_layer_of_the_built_image_holds_the_secret(make_args, wheel_index, docker_ready,
                                                      tmp_path):
    if HOST_PY != "3.11":
        pytest.skip("the fixture's debian-12 base has bookworm's Python 3.11")
    args = _with_secret(make_args, wheel_index)
    made = run_envgen(*args, "--flavor", "venv", "--image", "--gpu-arch", "sm_90", "--base",
                      docker_ready["base"], "--json")
    assert made.returncode == 0, made.stderr
    lock = json.loads(made.stdout)["directory"]
    built = run_envgen("build", lock, "--network", "host", "--json", timeout=900,
                       env={**os.environ, "ENVGEN_CACHE_DIR": str(tmp_path / "cache")})
    assert built.returncode == 0, built.stderr[-3000:]
    assert SECRET not in built.stdout + built.stderr
    image = json.loads(built.stdout)["references"][0]
    saved = tmp_path / "image.tar"
    subprocess.run(["/usr/bin/docker", "save", "-o", str(saved), image], check=True, timeout=600)
    assert SECRET.encode() not in saved.read_bytes()
    history = subprocess.run(["/usr/bin/docker", "history", "--no-trunc", image],
                             capture_output=True, text=True, check=True, timeout=120).stdout
    assert SECRET not in history


@fault("S06", "another listener on the ccache store's port asks for the token", exit=0)
@pytest.mark.integration
def test_a_port_squatter_never_gets_the_token(tmp_path):
    """Another local user listening on the store's port: envgen asks it to prove it holds the
    token (an HMAC of a fresh nonce), never sends the token, and builds without ccache."""
    import http.server
    import threading

    seen: list[str] = []

    class Squatter(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            return

        def do_GET(self) -> None:  # answers everything as a store of that directory would
            seen.append(self.path)
            body = str(tmp_path / "ccache" / "objects").encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Squatter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        with ccache_store.serving("127.0.0.1", tmp_path / "ccache", port) as store:
            assert isinstance(store, str) and f"cannot listen on 127.0.0.1:{port}" in store
    finally:
        server.shutdown()
        server.server_close()
    token = ccache_store.token(tmp_path / "ccache")
    assert seen and not any(token in path for path in seen)


@fault("S07", "a ccache upload cut off in the middle of an object", exit=0)
@pytest.mark.integration
def test_a_put_cut_off_stores_nothing_and_leaves_no_temporary_file(tmp_path):
    port = _dead_port()
    with ccache_store.serving("127.0.0.1", tmp_path / "ccache", port) as running:
        assert not isinstance(running, str), running
        _cut_off(running, f"http://127.0.0.1:{port}/{running.url.rsplit('/', 1)[1]}", port)


def _cut_off(running, base: str, port: int) -> None:
    prefix = base.split(f":{port}", 1)[1]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(f"PUT {prefix}/c1/cutoff HTTP/1.1\r\nHost: x\r\n"
                     "Content-Length: 1000000\r\n\r\n".encode() + b"x" * 300_000)
    for _ in range(50):  # the handler sees the end of the stream, then cleans up
        leftovers = list(running.root.rglob("*cutoff*"))
        if not leftovers:
            break
        time.sleep(0.1)
    assert not (running.root / "c1" / "cutoff").exists()
    assert leftovers == [] and running.counts.stored == 0
    assert call("PUT", f"{base}/c1/whole", b"y" * 300_000)[0] == 201  # a whole one is stored


@fault("S08", "a lock file edited, emptied or symlinked to /etc/passwd, then drift / whatif",
       exit=2)
@pytest.mark.integration
def test_an_edited_lock_is_refused_before_anything_is_read(make_args, tmp_path):
    made = run_envgen(*make_args, "--torch", "2.9.0", "--json")
    assert made.returncode == 0, made.stderr
    locked = Path(json.loads(made.stdout)["directory"])
    """drift and whatif check every lock file against the manifest, as install does: an
    edited, emptied or replaced requirements file is not "as made"."""
    lock = locked / "requirements.lock.txt"
    for change in ("edit", "empty", "symlink"):
        original = lock.read_bytes()
        if change == "edit":
            lock.write_bytes(original.replace(b"filelock==3.16.1", b"filelock==3.16.2"))
        elif change == "empty":
            lock.write_bytes(b"")
        else:
            lock.unlink()
            lock.symlink_to("/etc/passwd")
        try:
            matrix = make_args[make_args.index("--matrix-dir") + 1]
            for cmd in (["drift", "--lock", str(locked)],
                        ["whatif", "--lock", str(locked), "--torch", "2.12", "--no-lock"]):
                proc = run_envgen(*cmd, "--matrix-dir", matrix, "--json")
                assert proc.returncode == 2, (change, cmd[0], proc.stderr)
                error = json.loads(proc.stdout)["error"]
                assert "was modified after envgen wrote it" in error["message"], change
                assert error["source"] == "--lock"
        finally:
            lock.unlink()
            lock.write_bytes(original)


