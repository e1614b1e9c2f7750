"""The index-page HTTP cache (envgen.harvest.cache.fetch_page, CacheControl underneath) against
a real loopback index: pages are revalidated, kept only when their parser accepted them, and
read offline (redirects followed, pages without validators included); misses are clear."""

from __future__ import annotations

import json

import pytest

from envgen.errors import HarvestError, NetworkError
from envgen.harvest.cache import Cache, Page, fetch_page
from envgen.harvest.http import Http, HttpOptions
from envgen.harvest.simple_index import ACCEPT

pytestmark = pytest.mark.integration
TORCH = "/simple/torch/"


def _files(page: Page) -> list[str]:
    doc = json.loads(page.body)
    if "files" not in doc:
        raise HarvestError(f"{page.url}: no files")
    return [f["filename"] for f in doc["files"]]


@pytest.fixture
def http():
    client = Http(HttpOptions(timeout=2.0, retries=1, backoff=0.01))
    yield client
    client.close()


def _hits(server, path: str) -> list[dict[str, str]]:
    return [headers for p, headers in server.state.log if p == path]


def test_a_stored_page_is_revalidated_and_read_offline(index_server, http, tmp_path):
    cache = Cache(tmp_path)
    url = index_server.url + TORCH
    first = fetch_page(http, cache, url, ACCEPT, _files)
    again = fetch_page(http, cache, url, ACCEPT, _files)
    assert first == again and first
    sent = _hits(index_server, TORCH)
    assert "If-None-Match" not in sent[0] and sent[1]["If-None-Match"]  # a 304 the second time
    assert sent[1]["Cache-Control"] == "max-age=0"
    offline = fetch_page(None, Cache(tmp_path, offline=True), url, ACCEPT, _files)
    assert offline == first and len(_hits(index_server, TORCH)) == 2


def test_a_refused_page_leaves_the_stored_one(index_server, http, tmp_path):
    cache = Cache(tmp_path)
    url = index_server.url + TORCH
    good = fetch_page(http, cache, url, ACCEPT, _files)
    index_server.state.raw[TORCH] = (200, b"{}", {"Content-Type": ACCEPT.split(",")[0]})
    with pytest.raises(HarvestError, match="no files"):
        fetch_page(http, cache, url, ACCEPT, _files)
    assert fetch_page(None, Cache(tmp_path, offline=True), url, ACCEPT, _files) == good


def test_a_page_without_validators_is_kept_for_offline(index_server, http, tmp_path):
    """A Release file served without ETag / Last-Modified / max-age (the loopback file server
    sends none): stored anyway, and fetched again (not served from the cache) online."""
    path = next(iter(index_server.state.files))
    url = index_server.url + path
    cache = Cache(tmp_path)
    body = fetch_page(http, cache, url, None, lambda page: page.body)
    assert fetch_page(http, cache, url, None, lambda page: page.body) == body
    assert len(_hits(index_server, path)) == 2
    assert fetch_page(None, Cache(tmp_path, offline=True), url, None, lambda p: p.body) == body


def test_offline_follows_a_stored_redirect(index_server, http, tmp_path):
    index_server.state.raw["/simple/Torch/"] = (302, b"", {"Location": TORCH})
    url = index_server.url + "/simple/Torch/"
    online = fetch_page(http, Cache(tmp_path), url, ACCEPT, lambda page: page)
    offline = fetch_page(None, Cache(tmp_path, offline=True), url, ACCEPT, lambda page: page)
    assert online.url == offline.url == index_server.url + TORCH
    assert offline.body == online.body and offline.content_type == online.content_type


def test_404_is_none_and_an_offline_miss_names_the_cache(index_server, http, tmp_path):
    assert fetch_page(http, Cache(tmp_path), index_server.url + "/simple/nope/", ACCEPT,
                      _files) is None
    with pytest.raises(NetworkError, match=r"offline: .*/simple/torch/ is not in the cache at"):
        fetch_page(http, Cache(tmp_path / "empty", offline=True), index_server.url + TORCH,
                   ACCEPT, _files)
