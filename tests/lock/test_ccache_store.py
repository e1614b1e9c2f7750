"""The classic engine's ccache store (envgen/image/ccache_store.py) on a loopback address:
ccache's HTTP verbs, the token, keys that are not ccache's, a second build sharing the store,
the LRU trim, and a real ccache (4.4+) compiling through it: the second compile is a remote
hit and nothing but an empty marker is written locally (what would land in an image layer)."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
from pathlib import Path

import pytest
from support.http_call import call

from envgen.image import ccache_store

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def store(tmp_path):
    port = free_port()
    with ccache_store.serving("127.0.0.1", tmp_path / "ccache", port) as running:
        assert not isinstance(running, str), running
        yield running, f"http://127.0.0.1:{port}/{running.url.rsplit('/', 1)[1]}", port


def test_get_head_put_delete_and_the_counts(store):
    running, base, _ = store
    assert call("GET", f"{base}/c0/692cmih9vcrdl") == (404, b"")
    assert call("HEAD", f"{base}/c0/692cmih9vcrdl")[0] == 404
    assert call("PUT", f"{base}/c0/692cmih9vcrdl", b"object bytes")[0] == 201
    assert call("HEAD", f"{base}/c0/692cmih9vcrdl")[0] == 200
    assert call("GET", f"{base}/c0/692cmih9vcrdl") == (200, b"object bytes")
    assert (running.root / "c0" / "692cmih9vcrdl").read_bytes() == b"object bytes"
    assert call("DELETE", f"{base}/c0/692cmih9vcrdl")[0] == 204
    assert call("GET", f"{base}/c0/692cmih9vcrdl")[0] == 404
    c = running.counts
    assert (c.hits, c.misses, c.stored) == (1, 2, 1)
    assert running.summary()["hits"] == 1 and "…" in running.summary()["url"]
    assert running.build_args == {"ENVGEN_CCACHE": running.url}
    assert running.extra_hosts == {"envgen-ccache": "127.0.0.1"}


def test_the_token_guards_every_path_and_keys_must_be_ccaches(store):
    running, base, port = store
    root = f"http://127.0.0.1:{port}"
    assert call("PUT", f"{root}/0123456789abcdef0123456789abcdef/c0/x", b"poison")[0] == 403
    assert call("GET", f"{root}/c0/x")[0] == 403
    for bad in ("../token", "c0/../../token", "C0/X", "a/b/c/d", "", "c0/x.tmp"):
        assert call("PUT", f"{base}/{bad}", b"x")[0] in (400, 403), bad
    assert not list(running.root.rglob("*"))  # nothing was written
    assert (running.root.parent / "token").read_text().strip() == running.url.rsplit("/", 1)[1]


def test_the_token_is_kept_private_and_stable(tmp_path):
    directory = tmp_path / "ccache"
    first = ccache_store.token(directory)
    assert ccache_store.token(directory) == first and len(first) == 32
    assert stat.S_IMODE((directory / "token").stat().st_mode) == 0o600
    (directory / "token").write_text("not a token\n")
    assert ccache_store.token(directory) != first  # a damaged token is made again


def test_a_second_build_shares_the_running_store_and_another_port_user_is_named(store,
                                                                                 tmp_path):
    running, _, port = store
    with ccache_store.serving("127.0.0.1", running.root.parent, port) as second:
        assert not isinstance(second, str) and second.shared and second.counts is None
        assert second.url == running.url
    with ccache_store.serving("127.0.0.1", tmp_path / "other", port) as third:
        assert isinstance(third, str)
        assert f"cannot listen on 127.0.0.1:{port}" in third and "ENVGEN_CCACHE_PORT" in third


def test_trim_removes_the_least_recently_used_first(tmp_path):
    root = tmp_path / "objects"
    (root / "aa").mkdir(parents=True)
    for i in range(10):
        path = root / "aa" / f"obj{i}"
        path.write_bytes(b"x" * 100)
        os.utime(path, ns=(i * 10**9, i * 10**9))
    assert ccache_store.trim(root, 2000) == 0
    assert ccache_store.trim(root, 500) == 600  # down to 80% of the limit: 4 objects left
    assert sorted(p.name for p in (root / "aa").iterdir()) == [f"obj{i}" for i in range(6, 10)]


def test_settings_from_the_environment(monkeypatch):
    monkeypatch.setenv("ENVGEN_CCACHE_PORT", "40001")
    monkeypatch.setenv("ENVGEN_CCACHE_MAX_GB", "0.5")
    assert ccache_store.port() == 40001 and ccache_store.max_bytes() == 500_000_000
    monkeypatch.setenv("ENVGEN_CCACHE_PORT", "99999")
    monkeypatch.setenv("ENVGEN_CCACHE_MAX_GB", "lots")
    assert ccache_store.port() == ccache_store.DEFAULT_PORT
    assert ccache_store.max_bytes() == int(ccache_store.DEFAULT_MAX_GB * 1e9)


def _ccache() -> str:
    found = shutil.which("ccache")
    if found is None:
        reason = "ccache is not installed (tests/support/docker-up.sh installs it)"
        if os.environ.get("ENVGEN_REQUIRE_DOCKER"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def test_a_real_ccache_hits_the_store_and_writes_nothing_locally(store, tmp_path):
    """As the classic Dockerfile runs it: remote_only, no stats, a local dir in /tmp."""
    running, base, _ = store
    ccache = _ccache()
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    src = tmp_path / "op.c"
    src.write_text("int envgen_op(int x) { return 3 * x + 1; }\n")
    local = tmp_path / "local"
    env = {**os.environ, "CCACHE_DIR": str(local), "CCACHE_REMOTE_STORAGE": base,
           "CCACHE_REMOTE_ONLY": "true", "CCACHE_NOSTATS": "true"}
    objects = []
    for n in (1, 2):
        out = tmp_path / f"op{n}.o"
        subprocess.run([ccache, compiler, "-c", str(src), "-o", str(out)], env=env, check=True,
                       timeout=120)
        objects.append(out.read_bytes())
    c = running.counts
    assert c.stored >= 1 and c.hits >= 1, (c.hits, c.misses, c.stored)
    assert objects[0] == objects[1]
    assert [p for p in local.rglob("*") if p.is_file() and p.stat().st_size] == []
    assert any(Path(running.root).rglob("*"))


def test_the_gateway_is_the_listed_one_else_the_subnets_first_address():
    """dockerd restarted over an existing docker0 lists the default bridge as
    {"Subnet": "172.17.0.0/16"} only (seen on the CI machine): the ops step then lost its
    store, and the build said "no bridge gateway"."""
    from envgen.image.ccache_store import ipam_gateway

    assert ipam_gateway([{"Subnet": "172.17.0.0/16", "Gateway": "172.17.0.1"}]) == "172.17.0.1"
    assert ipam_gateway([{"Subnet": "172.17.0.0/16"}]) == "172.17.0.1"
    assert ipam_gateway([{"Subnet": "fd00::/64", "Gateway": "fd00::1"},
                         {"Subnet": "10.9.0.0/24"}]) == "10.9.0.1"
    assert ipam_gateway([{"Subnet": "fd00::/64"}]) is None
    assert ipam_gateway([]) is None and ipam_gateway([{"Subnet": "not a subnet"}]) is None



def test_a_client_that_went_away_is_not_reported_but_a_bug_is(tmp_path, capsys):
    server = ccache_store._Server(("127.0.0.1", 0), tmp_path, "t" * 32)
    try:
        for gone in (BrokenPipeError(), ConnectionResetError()):
            try:
                raise gone
            except ConnectionError:
                server.handle_error(None, ("127.0.0.1", 1))
        assert capsys.readouterr().err == ""
        try:
            raise ValueError("a bug in the store")
        except ValueError:
            server.handle_error(None, ("127.0.0.1", 1))
        assert "a bug in the store" in capsys.readouterr().err
    finally:
        server.server_close()
