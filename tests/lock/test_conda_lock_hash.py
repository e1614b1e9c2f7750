"""conda-lock's content hash, remembered per input so that a warm `envgen make` does not
import conda-lock (~0.9 s)."""

from __future__ import annotations

import pytest

from envgen.lock import conda_lock_hash as mod

ENV = "channels:\n  - conda-forge\ndependencies:\n  - python=3.11\n"
VP = "subdirs:\n  linux-64:\n    packages:\n      __glibc: '2.17'\n"


def test_the_hash_is_conda_locks_and_is_remembered(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path))
    first = mod.content_hash(ENV, VP, "linux-64")
    assert first == mod.compute(ENV, VP, "linux-64") and len(first) == 64
    stored = list((tmp_path / "conda-lock-hash").iterdir())
    assert [p.read_text() for p in stored] == [first]

    def refuse(*_):
        raise AssertionError("conda-lock was asked again")

    monkeypatch.setattr(mod, "compute", refuse)
    assert mod.content_hash(ENV, VP, "linux-64") == first
    with pytest.raises(AssertionError, match="asked again"):  # another input: computed
        mod.content_hash(ENV + "  - pip\n", VP, "linux-64")


def test_a_damaged_or_unusable_cache_only_costs_time(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path))
    first = mod.content_hash(ENV, VP, "linux-64")
    (stored,) = (tmp_path / "conda-lock-hash").iterdir()
    stored.write_bytes(b"\xff not a hash")
    assert mod.content_hash(ENV, VP, "linux-64") == first  # computed again, and rewritten
    assert stored.read_text() == first
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(blocker))  # a cache dir that is a file
    assert mod.content_hash(ENV, VP, "linux-64") == first
