"""No link of the built docs site leads to a missing file: every local href and src of every
page, and every record link of the selector's data (evidence/<combination>/<record>.json)."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

pytestmark = pytest.mark.integration


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.links.append(value)


def _target(site: Path, page: Path, link: str) -> Path | None:
    """The file ``link`` on ``page`` names, or None for a link outside the site."""
    parts = urlsplit(link)
    if parts.scheme or parts.netloc or link.startswith(("#", "mailto:", "data:")):
        return None
    base = "/" + page.relative_to(site).as_posix()
    path = unquote(urlsplit(urljoin(base, parts.path)).path).lstrip("/")
    target = site / path
    return target / "index.html" if path.endswith("/") or target.is_dir() else target


def test_every_local_link_of_every_page_exists(built_site):
    pages = sorted(built_site.rglob("*.html"))
    assert len(pages) >= 9
    missing, checked = [], 0
    for page in pages:
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        for link in parser.links:
            target = _target(built_site, page, link)
            if target is None:
                continue
            checked += 1
            if not target.is_file():
                missing.append(f"{page.relative_to(built_site)}: {link}")
    assert checked > 100
    assert missing == []


def test_every_record_the_selector_links_is_published(built_site):
    data = json.loads((built_site / "selector.json").read_text(encoding="utf-8"))
    hrefs = [r["href"] for e in data["evidence"] for r in e["records"]]
    assert hrefs, "the shipped matrix has records"
    assert [h for h in hrefs if not (built_site / h).is_file()] == []
    for href in hrefs[:3]:
        json.loads((built_site / href).read_text(encoding="utf-8"))  # a record, as JSON


def test_the_checker_sees_a_missing_file(tmp_path):
    (tmp_path / "a").mkdir()
    page = tmp_path / "a" / "index.html"
    page.write_text('<a href="../b/">b</a><img src="x.png">')
    assert _target(tmp_path, page, "../b/") == tmp_path / "b" / "index.html"
    assert _target(tmp_path, page, "x.png") == tmp_path / "a" / "x.png"
    assert _target(tmp_path, page, "https://example.org/") is None
    assert not _target(tmp_path, page, "../b/").is_file()


def test_the_json_schemas_are_published_with_their_page(built_site):
    from envgen.schemas import __file__ as schemas_init

    shipped = sorted(p.name for p in Path(schemas_init).parent.glob("*.schema.json"))
    assert shipped and sorted(p.name for p in (built_site / "schemas").glob("*.json")) == shipped
    page = (built_site / "schemas" / "index.html").read_text(encoding="utf-8")
    for name in ("lock-manifest", "result-record", "compatibility-table", "doctor-snapshot"):
        assert f"{name}.schema.json" in page
    for name in shipped:
        json.loads((built_site / "schemas" / name).read_text(encoding="utf-8"))
