"""The record index (envgen/results/index.py): a stored record's bytes, once validated, are
known by their sha256; loading them again parses no JSON, validates nothing and hashes no
canonical JSON, and gives the same records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from results_data import RECORDS, VERIFY, load_json

from envgen.errors import DataError
from envgen.results import index, store
from envgen.results.index import RecordSummary
from envgen.results.store import StoredRecord, add, load, load_many, verified_lock_hashes


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A private cache with the index on; the process's open indexes forgotten."""
    where = tmp_path / "cache"
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(where))
    monkeypatch.setenv("ENVGEN_RECORDS_CACHE", "1")
    monkeypatch.setattr(index, "_OPEN", {})
    return where


def _no_parsing(monkeypatch) -> None:
    def fail(_data):
        raise AssertionError("a record was parsed again")
    monkeypatch.setattr(store, "parse_any", fail)


def test_a_second_load_parses_nothing_and_gives_the_same_records(tmp_path, cache, monkeypatch):
    results = tmp_path / "results"
    add(results, RECORDS)
    first = load(results)
    assert list((cache / "records").glob("*.marshal"))
    monkeypatch.setattr(index, "_OPEN", {})  # as in a new process: read from the file
    _no_parsing(monkeypatch)
    again = load(results)
    assert again == first
    assert [s.summary for s in again] == [s.summary for s in first]
    assert [s.path for s in again] == [s.path for s in first]
    monkeypatch.undo()
    # the record itself is parsed on first use, from the file, and is the same record
    assert [s.record for s in again] == [s.record for s in first]


def test_the_summary_is_the_records_shared_surface(tmp_path, cache):
    results = tmp_path / "results"
    paths = {o.path for o in add(results, RECORDS)}
    for stored in load(results):
        r = stored.record
        s = stored.summary
        assert (s.id, s.kind, s.combination, s.status, s.tier, s.flavor, s.finished,
                s.finished_at, s.envgen_version, s.machine_summary, s.error, s.log_digest,
                s.seconds, s.image_size_bytes, s.on_gpu) == (
            r.id, r.kind, r.combination, r.status, r.tier, r.flavor, r.finished, r.finished_at,
            r.envgen_version, r.machine_summary, r.error, r.log_digest, r.seconds,
            r.image_size_bytes, r.on_gpu)
        assert s.lock_hash == (r.lock_hash if r.kind == "verify" else
                               (r.lock.hash if r.lock else None))
        assert RecordSummary.from_tuple(s.to_tuple()) == s
        assert stored.path in paths


def test_changed_bytes_are_validated_again(tmp_path, cache):
    results = tmp_path / "results"
    (o, *_) = add(results, RECORDS)
    load(results)
    data = json.loads(o.path.read_text())
    data["status"] = "passed"
    o.path.write_text(json.dumps(data))
    with pytest.raises(DataError, match=r"\$\.status"):
        load(results)


def test_a_known_record_under_the_wrong_name_is_still_refused(tmp_path, cache, monkeypatch):
    results = tmp_path / "results"
    (o,) = add(results, RECORDS[:1])
    load(results)
    o.path.rename(o.path.with_name("20990101T000000Z-000000000000.json"))
    _no_parsing(monkeypatch)
    with pytest.raises(DataError, match="stored under the wrong name; this record belongs at "):
        load(results)


def test_a_corrupt_or_unwritable_index_only_costs_time(tmp_path, cache, monkeypatch):
    results = tmp_path / "results"
    add(results, RECORDS)
    first = load(results)
    (path,) = (cache / "records").glob("*.marshal")
    path.write_bytes(b"\x00not marshal")
    monkeypatch.setattr(index, "_OPEN", {})
    assert load(results) == first
    monkeypatch.setenv("ENVGEN_CACHE_DIR", str(tmp_path / "file"))
    (tmp_path / "file").write_text("a file where the cache folder would be\n")
    monkeypatch.setattr(index, "_OPEN", {})
    assert load(results) == first


def test_the_index_can_be_turned_off(tmp_path, cache, monkeypatch):
    monkeypatch.setenv("ENVGEN_RECORDS_CACHE", "0")
    results = tmp_path / "results"
    add(results, RECORDS)
    assert len(load(results)) == len(RECORDS)
    assert not (cache / "records").exists()


def test_a_lazily_read_record_that_changed_is_an_error(tmp_path, cache, monkeypatch):
    results = tmp_path / "results"
    (o,) = add(results, VERIFY[:1])
    load(results)
    monkeypatch.setattr(index, "_OPEN", {})
    (stored,) = load(results)
    data = load_json(o.path)
    data["log_digest"] = "sha256:" + "0" * 64
    o.path.write_text(json.dumps(data))
    with pytest.raises(DataError, match="changed while envgen was reading"):
        _ = stored.record


def test_stored_records_compare_by_path_and_id_and_are_immutable(tmp_path):
    results = tmp_path / "results"
    (o,) = add(results, VERIFY[:1])
    a, b = StoredRecord(o.record, o.path), StoredRecord(None, str(o.path),
                                                        summary=RecordSummary.of(o.record))
    assert a == b and hash(a) == hash(b) and a.id == o.record.id and b.path == o.path
    with pytest.raises(AttributeError):
        a.path = Path("elsewhere")
    with pytest.raises(TypeError):
        StoredRecord(None, o.path)


def test_verified_lock_hashes_are_those_of_verify_records(tmp_path, cache):
    one, two = tmp_path / "one", tmp_path / "two"
    add(one, RECORDS)
    add(two, VERIFY[:1])  # the same record in both: counted once
    want = {load_json(p)["lock_hash"] for p in VERIFY}
    assert verified_lock_hashes([one, two]) == want
    assert len(load_many([one, two])) == len(RECORDS)
    assert verified_lock_hashes([tmp_path / "nowhere"]) == frozenset()


def test_each_results_directory_has_its_own_index_of_its_records(tmp_path, cache, monkeypatch):
    one, two = tmp_path / "one", tmp_path / "two"
    outcomes = add(one, RECORDS)
    add(two, VERIFY[:1])
    load(one)
    load(two)
    files = sorted((cache / "records").glob("*.marshal"), key=lambda p: p.stat().st_size)
    assert len(files) == 2 and files[0].stat().st_size < files[1].stat().st_size
    big = files[1].stat().st_size
    outcomes[0].path.unlink()  # a record gone: its entry goes at the next load
    monkeypatch.setattr(index, "_OPEN", {})
    assert len(load(one)) == len(RECORDS) - 1
    assert files[1].stat().st_size < big
