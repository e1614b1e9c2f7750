"""Read a project's file list from a simple repository API page (PEP 503 HTML or PEP 691 JSON).

The page is requested with content negotiation (JSON preferred, HTML accepted) and parsed by
what the server actually sent. Links are made absolute against the page URL, so PyTorch's
relative ``../../whl/cu121/torch-….whl`` hrefs work; ``#sha256=`` fragments, PEP 592 yanking,
PEP 658/714 metadata availability and PEP 700 upload times are kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import unquote, urldefrag, urljoin

from packaging.utils import canonicalize_name

from envgen.errors import HarvestError
from envgen.harvest.cache import Cache
from envgen.harvest.http import Http

ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"


@dataclass(frozen=True)
class FileLink:
    filename: str
    url: str  # absolute, without fragment
    sha256: str | None = None
    requires_python: str | None = None
    upload_time: str | None = None  # ISO 8601 as published
    core_metadata: bool = False  # PEP 658/714 advertised
    yanked: bool = False

    @property
    def uploaded(self) -> str | None:
        return self.upload_time[:10] if self.upload_time else None


def _link(base: str, href: str, **fields: object) -> FileLink:
    url, fragment = urldefrag(urljoin(base, href))
    sha = None
    if fragment.startswith("sha256="):
        sha = fragment.split("=", 1)[1].lower()
    filename = url.rsplit("/", 1)[-1]
    return FileLink(filename=unquote(filename), url=url, sha256=sha, **fields)  # type: ignore[arg-type]


class _AnchorParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: str | None = None
        self.anchors: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")
        elif tag == "a":
            self.anchors.append(dict(attrs))


def _truthy_metadata(value: object) -> bool:
    if value is None or value is False:
        return False
    return not (isinstance(value, str) and value.lower() == "false")


def parse_html(body: str, page_url: str) -> list[FileLink]:
    parser = _AnchorParser()
    parser.feed(body)
    parser.close()
    base = urljoin(page_url, parser.base) if parser.base else page_url
    links = []
    for attrs in parser.anchors:
        href = attrs.get("href")
        if not href:
            continue
        meta = attrs.get("data-core-metadata", attrs.get("data-dist-info-metadata"))
        has_meta = ("data-core-metadata" in attrs or "data-dist-info-metadata" in attrs) and (
            _truthy_metadata(meta if meta is not None else "true")
        )
        links.append(
            _link(
                base,
                href,
                requires_python=attrs.get("data-requires-python") or None,
                upload_time=attrs.get("data-upload-time") or None,
                core_metadata=has_meta,
                yanked="data-yanked" in attrs,
            )
        )
    return links


def parse_json(body: str, page_url: str) -> list[FileLink]:
    try:
        doc = json.loads(body)
        files = doc["files"]
    except (ValueError, KeyError, TypeError) as exc:
        raise HarvestError(f"{page_url}: not a PEP 691 project page ({exc})") from exc
    links = []
    for entry in files:
        url = urljoin(page_url, entry["url"])
        sha = (entry.get("hashes") or {}).get("sha256")
        meta = entry.get("core-metadata", entry.get("dist-info-metadata"))
        link = _link(
            page_url,
            url,
            requires_python=entry.get("requires-python") or None,
            upload_time=entry.get("upload-time") or None,
            core_metadata=_truthy_metadata(meta),
            yanked=bool(entry.get("yanked")),
        )
        if sha and not link.sha256:
            link = FileLink(**{**link.__dict__, "sha256": sha.lower()})
        links.append(link)
    return links


def project_url(index_url: str, project: str) -> str:
    return index_url.rstrip("/") + "/" + canonicalize_name(project) + "/"


def fetch_project(
    http: Http | None, cache: Cache, index_url: str, project: str
) -> list[FileLink] | None:
    """The files of ``project`` on the index; ``None`` when the index has no such project."""
    url = project_url(index_url, project)
    cached = cache.get_page(url, ACCEPT)
    if cache.offline or http is None:
        if cached is None:
            raise cache.offline_miss(url)
        body, meta = cached
    else:
        headers = {"Accept": ACCEPT}
        if cached:
            if cached[1].get("etag"):
                headers["If-None-Match"] = cached[1]["etag"]
            if cached[1].get("last_modified"):
                headers["If-Modified-Since"] = cached[1]["last_modified"]
        response = http.get(url, headers=headers)
        if response is None:
            return None
        if response.status_code == 304 and cached:
            body, meta = cached
        else:
            body = response.content
            meta = {
                "content_type": response.headers.get("Content-Type", ""),
                "url": response.url or url,
            }
            for key, header in (("etag", "ETag"), ("last_modified", "Last-Modified")):
                if response.headers.get(header):
                    meta[key] = response.headers[header]
            cache.put_page(url, ACCEPT, body, meta)
    page_url = meta.get("url") or url
    text = body.decode("utf-8", errors="replace")
    if meta.get("content_type", "").split(";")[0].strip() == JSON_TYPE:
        return parse_json(text, page_url)
    return parse_html(text, page_url)
