"""Check before trusting (issue 37 part 6): an interpreter that does not run envgen's collector
is not a healthy environment; a node whose answer breaks the snapshot schema is an error, not
a clean bill; a cache file someone else could have written is never unpickled. (Locks edited
after `make` are refused by drift and whatif: tests/faults/test_secrets.py, S08.)"""

from __future__ import annotations

import json
import os
import pickle
import stat
import sys
from pathlib import Path

import pytest
from support.faultkit import run_subprocess

from envgen.userfile import read_private_cache

fault = pytest.mark.fault


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


@fault("K01", "doctor --python with an interpreter that prints {} and exits 0", exit=4)
def test_an_interpreter_that_only_prints_json(tmp_path, fixture_matrix):
    fake = _script(tmp_path / "python", "echo '{}'\necho '{\"schema\": 1}'\n")
    r = run_subprocess("doctor", "--python", fake, "--json",
                       env={"ENVGEN_MATRIX_DIR": str(fixture_matrix)}, cwd=tmp_path)
    assert r.code == 4, r.out + r.err
    err = r.error
    assert "without the collector's snapshot" in err["message"] and err["source"] == "--python"


def test_the_real_collector_still_answers(tmp_path, fixture_matrix):
    r = run_subprocess("doctor", "--python", sys.executable, "--json",
                       env={"ENVGEN_MATRIX_DIR": str(fixture_matrix)}, cwd=tmp_path)
    assert r.code in (0, 1), r.err
    assert json.loads(r.out)["snapshot"]["python"] == ".".join(map(str, sys.version_info[:3]))


@pytest.mark.integration
@fault("K02", "a node's snapshot breaks the schema: an error finding, not 'can launch'", exit=1)
def test_an_invalid_node_snapshot_is_an_error(tmp_path):
    # the job's Python on the node answers the collector with a wrong type; every other
    # probe is answered for real
    wrapper = _script(tmp_path / "python", f"""case "$*" in
  *--budget*) {sys.executable} "$@" | sed 's/"python": "[^"]*"/"python": 42/' ;;
  *) exec {sys.executable} "$@" ;;
esac
""")
    r = run_subprocess("preflight", "--local", "--python", wrapper, "--no-collective",
                       "--json", cwd=tmp_path, timeout=300)
    doc = json.loads(r.out)
    kinds = {f["kind"]: f for f in doc["findings"]}
    assert r.code == 1, r.err
    assert kinds["node-snapshot-invalid"]["severity"] == "error"
    assert "python: 42" in kinds["node-snapshot-invalid"]["summary"]


class _Planted:
    """A pickle that would create a file when loaded (what another user could plant)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


@fault("K03", "a facts cache in a folder others can write: never unpickled", exit=0)
def test_a_planted_cache_file_is_not_loaded(tmp_path, monkeypatch):
    from envgen.facts import compiled

    cache = tmp_path / "shared-cache"
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(cache))
    monkeypatch.delenv("ENVGEN_FACTS_CACHE", raising=False)
    folder = Path(compiled._path("x")).parent
    folder.mkdir(parents=True)
    marker = tmp_path / "planted-code-ran"
    Path(compiled._path("x")).write_bytes(pickle.dumps(_Planted(marker)))
    os.chmod(folder, 0o777)  # anyone may write there
    assert compiled.read("x") is None and not marker.exists()
    assert read_private_cache(compiled._path("x")) is None


def test_the_private_cache_rules(tmp_path):
    folder = tmp_path / "c"
    folder.mkdir(mode=0o700)
    f = folder / "a.bin"
    f.write_bytes(b"ok")
    f.chmod(0o644)
    assert read_private_cache(f) == b"ok"
    f.chmod(0o666)  # others may write the file
    assert read_private_cache(f) is None
    f.chmod(0o644)
    folder.chmod(0o775)  # the group may replace it
    assert read_private_cache(f) is None
    folder.chmod(0o700)
    link = folder / "link.bin"
    link.symlink_to(f)
    assert read_private_cache(link) is None  # a link could point anywhere
    if os.geteuid() == 0:  # a file owned by another user
        os.chown(f, 65534, 65534)
        assert read_private_cache(f) is None
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    assert read_private_cache(fifo) is None and stat.S_ISFIFO(fifo.stat().st_mode)
