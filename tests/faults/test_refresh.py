"""`envgen matrix update` against a mirror that lies, fails or is cut off: every class ends in
exit 4 with the URL and the reason, and the facts envgen uses stay byte-for-byte what they were
(no `.harvested*` leftovers); a deliberate prune goes through --allow-removals; refreshed data
goes to the data directory, never into the installed package."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from support.faultkit import debris, tree
from support.index_server import IndexServer
from support.mini_pypi import sdist

fault = pytest.mark.fault
pytestmark = pytest.mark.integration

LOGIN = (b"<html><head><title>Sign in</title></head><body><form action='/login'>"
         b"<input type='password'></form><a href='/help'>Help</a></body></html>")
SDIST = "/files/deepspeed-0.19.8.tar.gz"
WHEEL = "/files/torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl"


@pytest.fixture
def update(cli, committed, fast):
    """`envgen matrix update --write` (plus options) on the committed mini matrix, checking
    that a failure leaves it byte-for-byte and without leftovers."""
    before = tree(committed)

    def run(*extra, code=4, **kw):
        r = cli("matrix", "update", "--matrix-dir", committed, "--cache-dir",
                fast["cache_dir"], "--timeout", "1", "--retries", "1", "--write", *extra, **kw)
        assert r.code == code, r.err
        if code != 0:
            assert tree(committed) == before
        assert debris(committed) == []
        return r
    return run


@fault("R01", "the index answers 200 with a proxy login page", exit=4)
def test_login_page(update, index_server):
    index_server.state.raw["/simple/torch/"] = (200, LOGIN, {"Content-Type": "text/html"})
    r = update("--json")
    assert r.error["kind"] == "index" and "not a project page of torch" in r.error["message"]
    assert "log in" in r.error["fix"]


@fault("R02", "a captive portal redirects the index to its own page", exit=4)
def test_captive_portal(update, index_server):
    with IndexServer() as portal:
        portal.state.raw["/portal"] = (200, LOGIN, {"Content-Type": "text/html"})
        index_server.state.raw["/simple/torch/"] = (302, b"", {"Location": f"{portal.url}/portal"})
        r = update()
    assert r.says(f"redirected to {portal.url}/portal")


@fault("R03", "a truncated project page (half the links cut off)", exit=4)
def test_truncated_page(update, index_server):
    index_server.state.html_only = True
    index_server.state.faults["/simple/torch/"] = ["cut:0.4"] * 10
    r = update()
    assert r.says("refusing this refresh", "--allow-removals", "  - torch ")


@fault("R04", "a partial mirror: half of the files missing", exit=4)
def test_partial_mirror(update, index_server):
    for page in ("/simple/torch/", "/simple/deepspeed/"):
        files = sorted(index_server.state.projects[page], key=lambda f: f.filename)
        index_server.state.projects[page] = files[: len(files) // 2]
    r = update("--json")
    assert "refusing this refresh" in r.error["message"]
    assert r.error["diff"]["files"]["torch.json"]["removed"]


@fault("R05", "a project page that lists no files", exit=4)
def test_empty_project_page(update, index_server):
    index_server.state.projects["/simple/colossalai/"] = []
    r = update()
    assert r.says("/simple/colossalai/", "no files")


@fault("R06", "a page served as text/plain", exit=4)
def test_text_plain(update, index_server):
    index_server.state.raw["/simple/torch/"] = (200, b"torch\n", {"Content-Type": "text/plain"})
    assert update().says("not an index page", "text/plain")


@fault("R07", "a PEP 691 JSON page of the wrong shape", exit=4)
@pytest.mark.parametrize("doc", [[], {"files": {}}, {"files": ["x"]}, {"files": [{"url": 5}]}])
def test_pep691_wrong_shape(update, index_server, doc):
    index_server.state.raw["/simple/deepspeed/"] = (
        200, json.dumps(doc).encode(), {"Content-Type": "application/vnd.pypi.simple.v1+json"})
    assert update().says("not a PEP 691 project page")


@fault("R08", "an sdist whose bytes do not match the index's sha256", exit=4)
def test_tampered_sdist(update, index_server):
    index_server.state.substitute[SDIST] = sdist("deepspeed-0.19.8", {
        "PKG-INFO": "Metadata-Version: 2.1\nName: deepspeed\nVersion: 0.19.8\n"
                    "Requires-Dist: evil\n"})
    r = update("--json")
    assert "sha256 mismatch" in r.error["message"] and SDIST in r.error["message"]
    assert "tampered or corrupted mirror" in r.error["fix"]


@fault("R09", "PEP 658 metadata whose bytes do not match its stated hash", exit=4)
def test_tampered_metadata(update, index_server):
    served = index_server.state.files[WHEEL]
    served.advertise_metadata = True
    index_server.state.substitute[WHEEL + ".metadata"] = served.metadata + b"Requires-Dist: evil\n"
    assert update().says("sha256 mismatch", WHEEL + ".metadata")


@fault("R10", "an index that keeps answering HTTP 500", exit=4)
def test_persistent_500(update, index_server):
    index_server.state.faults["/simple/torch/"] = ["500"] * 10
    assert update().says("failed after 2 attempts: HTTP 500", "--offline")


@fault("R11", "an index that never answers in time", exit=4)
def test_timeout(update, index_server):
    index_server.state.faults["/simple/torch/"] = ["sleep:3"] * 3
    assert update().says("timed out after 1s")


@fault("R12", "an index that refuses the connection", exit=4)
def test_connection_refused(cli, committed, fast):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    before = tree(committed)
    r = cli("matrix", "update", "--matrix-dir", committed, "--cache-dir", fast["cache_dir"],
            "--retries", "0", "--index", f"pypi=http://127.0.0.1:{port}/simple/", "--write")
    assert r.code == 4 and r.says("connection failed") and tree(committed) == before


@fault("R13", "an index that answers 403 (credentials needed)", exit=4)
def test_forbidden(update, index_server):
    index_server.state.raw["/simple/torch/"] = (403, b"no", {"Content-Type": "text/plain"})
    assert update().says("HTTP 403")


@fault("R14", "--allow-removals: a deliberate prune writes and shows what goes", exit=0)
def test_allow_removals(update, index_server, committed):
    index_server.state.projects["/simple/colossalai/"].pop()
    r = update("--allow-removals", code=0)
    assert r.says("  - colossalai ", "wrote ")


@fault("R15", "Ctrl-C / SIGTERM in the write phase: no leftovers, the old snapshot intact",
       exit=130)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_in_write_phase(committed, index_server, fast, signum):
    index_server.state.projects["/simple/colossalai/"].pop()  # something to write
    before = tree(committed)
    proc = subprocess.Popen(
        [sys.executable, "-m", "envgen", "matrix", "update", "--matrix-dir", str(committed),
         "--cache-dir", str(fast["cache_dir"]), "--write", "--allow-removals"],
        env={**os.environ, "ENVGEN_TEST_WRITE_DELAY": "1"}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(committed.glob(".harvested.new-*/*")) and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert "removed the partly written snapshot" in err and "Traceback" not in err
    assert tree(committed) == before and debris(committed) == []


@fault("R16", "refreshed facts go to --data; the matrix (an installed package's) is untouched",
       exit=0)
def test_data_dir(cli, committed, fast, index_server, tmp_path):
    index_server.state.projects["/simple/colossalai/"].pop()
    before = tree(committed)
    data = tmp_path / "data"
    r = cli("--data", data, "matrix", "update", "--matrix-dir", committed, "--cache-dir",
            fast["cache_dir"], "--write", "--allow-removals")
    assert r.code == 0 and r.says(f"wrote {data / 'harvested'}")
    assert tree(committed) == before
    assert (data / "harvested" / "frameworks.json").is_file()


@fault("R17", "--write with a data directory that is a file", exit=4)
def test_data_dir_is_a_file(cli, committed, fast, tmp_path):
    blocker = tmp_path / "data"
    blocker.write_text("x")
    r = cli("--data", blocker, "matrix", "update", "--matrix-dir", committed, "--write",
            "--offline", "--cache-dir", fast["cache_dir"])
    assert r.code == 4 and r.says("is a file", "source: --data")


@fault("R18", "a harvested file that is a JSON array / not JSON / missing", exit=1)
@pytest.mark.parametrize("content", ["[1, 2]", "{oops", None])
def test_harvested_file_broken(cli, committed, content):
    path = committed / "harvested" / "frameworks.json"
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
    r = cli("--matrix-dir", committed, "resolve", "--json")
    assert r.code == 1 and r.error["kind"] == "data"
    assert "frameworks.json" in r.error["message"]


@fault("R19", "--index naming no configured index, or a non-http mirror", exit=2)
@pytest.mark.parametrize("value", ["pypii", "pypi=ftp://mirror/simple", "pypi=http://a\nb/"])
def test_bad_index_option(cli, committed, value):
    r = cli("matrix", "update", "--matrix-dir", committed, "--index", value)
    assert r.code == 2 and r.says("--index")


@fault("R20", "--jobs 0 / --timeout 0", exit=2)
@pytest.mark.parametrize("flags", [["--jobs", "0"], ["--timeout", "0"]])
def test_bad_numbers(cli, committed, flags):
    r = cli("matrix", "update", "--matrix-dir", committed, *flags)
    assert r.code == 2 and r.says(f"source: {flags[0]}")


@fault("R21", "--offline with an empty cache", exit=4)
def test_offline_empty_cache(cli, committed, tmp_path):
    before = tree(committed)
    r = cli("matrix", "update", "--matrix-dir", committed, "--offline", "--cache-dir",
            tmp_path / "empty", "--write")
    assert r.code == 4 and r.says("is not in the cache") and tree(committed) == before


@fault("R22", "an index that redirects in a loop", exit=4)
def test_redirect_loop(update, index_server):
    index_server.state.raw["/simple/torch/"] = (302, b"", {"Location": "/simple/torch/"})
    assert update().says("TooManyRedirects")
