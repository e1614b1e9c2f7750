"""The compiled copy of the facts (envgen/facts/compiled.py): keyed by the files' content,
read lazily, and indistinguishable from facts read from the files."""

from __future__ import annotations

import copy
import dataclasses
import os
import pickle
import shutil
import time

import pytest

from envgen.facts import compiled, load_facts
from envgen.facts import load as load_module
from envgen.facts.model import FrameworkRelease, TorchBuild


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_FACTS_CACHE", "1")
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(compiled, "RACY_NS", 0)  # files written just now may be remembered
    load_module._CACHE.clear()
    yield tmp_path / "cache" / "facts"
    load_module._CACHE.clear()


def _parses(monkeypatch) -> list[str]:
    """The schema names checked from now on (the in-process copy forgotten first)."""
    calls: list[str] = []
    real = load_module.check
    monkeypatch.setattr(load_module, "check", lambda doc, name: calls.append(name) or real(
        doc, name))
    load_module._CACHE.clear()
    return calls


def test_keyed_by_content_not_by_time_or_place(matrix_copy, tmp_path, cache, monkeypatch):
    fresh = load_facts(matrix_copy)
    assert len(list(cache.glob("*.pickle"))) == 1
    calls = _parses(monkeypatch)
    path = matrix_copy / "curated" / "os.toml"
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # touched, same bytes
    assert load_facts(matrix_copy) == fresh and calls == []
    moved = tmp_path / "elsewhere"
    shutil.copytree(matrix_copy, moved)  # another checkout of the same matrix
    load_module._CACHE.clear()
    assert load_facts(moved) == fresh and calls == []
    original = path.read_text()
    path.write_text(original + "\n# an edit\n")
    load_module._CACHE.clear()
    load_facts(matrix_copy)
    assert "curated-os" in calls  # the edit: read and checked again
    assert len(list(cache.glob("*.pickle"))) == 2
    calls.clear()
    path.write_text(original)  # back as it was: the first copy again
    load_module._CACHE.clear()
    assert load_facts(matrix_copy) == fresh and calls == []


def test_an_edit_keeping_size_and_mtime_is_still_seen(matrix_copy, cache, monkeypatch):
    load_facts(matrix_copy)
    calls = _parses(monkeypatch)
    path = matrix_copy / "curated" / "policy.toml"
    st = path.stat()
    text = path.read_text()
    swapped = text.replace('"3.12", "3.11"', '"3.11", "3.12"', 1)
    assert swapped != text and len(swapped) == len(text)
    time.sleep(0.01)
    path.write_text(swapped)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime set back; ctime cannot be
    load_module._CACHE.clear()
    facts = load_facts(matrix_copy)
    assert calls and facts.policy.python_preference[:2] == ("3.11", "3.12")


def test_schema_and_version_are_in_the_key(matrix_copy, cache, monkeypatch):
    files = [("curated/os.toml", matrix_copy / "curated" / "os.toml")]
    k = compiled.key(files)
    assert compiled.key(files) == k
    monkeypatch.setattr("envgen.__version__", "99.0")
    assert compiled.key(files) != k
    monkeypatch.undo()
    monkeypatch.setattr(compiled, "_code_files", lambda: [matrix_copy / "curated" / "gpus.toml"])
    assert compiled.key(files) != k


def test_a_corrupt_or_foreign_copy_is_ignored(matrix_copy, cache, monkeypatch):
    fresh = load_facts(matrix_copy)
    for bad in (b"not a pickle", b"envgenF2" + b"\0" * 40, pickle.dumps({"x": 1})):
        for copy_ in cache.glob("*.pickle"):
            copy_.write_bytes(bad)
        calls = _parses(monkeypatch)
        assert load_facts(matrix_copy) == fresh and calls
    (cache / "hashes.memo").write_bytes(b"garbage")
    load_module._CACHE.clear()
    assert load_facts(matrix_copy) == fresh
    for n in range(compiled.KEEP + 3):
        compiled.write(f"extra{n}", fresh)
    assert len(list(cache.glob("*.pickle"))) == compiled.KEEP
    assert (cache / "hashes.memo").exists()  # not a copy: never pruned


def test_turned_off(matrix_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_FACTS_CACHE", "0")
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "cache"))
    load_module._CACHE.clear()
    load_facts(matrix_copy)
    assert not (tmp_path / "cache").exists()


def test_lazy_records_behave_as_plain_ones(matrix_copy, cache):
    fresh = load_facts(matrix_copy)
    load_module._CACHE.clear()
    hit = load_facts(matrix_copy)
    assert hit is not fresh and type(hit) is type(fresh)
    release, build = hit.frameworks[-1], hit.torch_builds[-1]
    assert type(release) is not FrameworkRelease and isinstance(release, FrameworkRelease)
    assert isinstance(build, TorchBuild)
    # bulky parts are not read until used
    assert release._blob is not None and build._blob is not None
    assert release.build == fresh.frameworks[-1].build and release._blob is None
    for got, want in [*zip(hit.frameworks, fresh.frameworks, strict=True),
                      *zip(hit.torch_builds, fresh.torch_builds, strict=True)]:
        assert got == want and want == got
        assert (got != want) is False and (want != got) is False
        assert repr(got) == repr(want)
        assert dataclasses.asdict(got) == dataclasses.asdict(want)
        assert type(pickle.loads(pickle.dumps(got))) is type(want)
        assert pickle.loads(pickle.dumps(got)) == want
        assert type(copy.deepcopy(got)) is type(want) and copy.deepcopy(got) == want
        changed = dataclasses.replace(got, version="9.9.9")
        assert type(changed) is type(want) and changed.version == "9.9.9"
        assert changed == dataclasses.replace(want, version="9.9.9")
        with pytest.raises(dataclasses.FrozenInstanceError):
            got.version = "1"  # type: ignore[misc]
    assert {hash(b) for b in hit.torch_builds} == {hash(b) for b in fresh.torch_builds}
    assert hit == fresh and fresh == hit
    again = compiled.loads(compiled.dumps(hit))  # a lazy record is stored as a plain one
    assert again == fresh


def test_hash_memo_reads_unchanged_files_once(matrix_copy, cache, monkeypatch):
    files = [(p.name, p) for p in sorted((matrix_copy / "curated").glob("*.toml"))]
    first = compiled.key(files)
    opened: list[str] = []
    real_open = open

    def spy(path, *a, **kw):
        opened.append(str(path))
        return real_open(path, *a, **kw)

    monkeypatch.setattr("builtins.open", spy)
    assert compiled.key(files) == first
    assert not [p for p in opened if p.endswith(".toml")]  # stat matched: not read again
    monkeypatch.setattr(compiled, "RACY_NS", 10 ** 12)
    path = matrix_copy / "curated" / "os.toml"
    path.write_text(path.read_text() + "\n")
    second = compiled.key(files)
    assert second != first
    opened.clear()
    assert compiled.key(files) == second
    assert [p for p in opened if p.endswith("os.toml")]  # just written: not remembered
