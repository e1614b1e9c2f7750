"""Read a project's file list from a simple repository API page (PEP 503 HTML or PEP 691 JSON).

The page is requested with content negotiation (JSON preferred, HTML accepted) and parsed by
what the server actually sent. Links are made absolute against the page URL, so PyTorch's
relative ``../../whl/cu121/torch-….whl`` hrefs work; ``#sha256=`` fragments, PEP 592 yanking,
PEP 658/714 metadata availability (and the metadata file's own sha256) and PEP 700 upload
times are kept.

A page is checked before it is used or cached: a 200 answer that is not an index page (a
proxy's login page, a captive portal, a text/plain error, a PEP 691 document of the wrong
shape, an HTML page without a single file of the project) raises
:class:`~envgen.errors.HarvestError` naming the URL, what the page looked like and where it
was redirected to, instead of reading as "this project has no files".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from html.parser import HTMLParser
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion

from envgen.errors import HarvestError
from envgen.harvest.cache import Cache, page_meta, revalidation_headers
from envgen.harvest.http import Http

ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
# What a simple index may answer with (PEP 503 / PEP 691); anything else is not an index page.
JSON_TYPES = frozenset({JSON_TYPE, "application/vnd.pypi.simple.latest+json"})
HTML_TYPES = frozenset(
    {
        "text/html",
        "application/xhtml+xml",
        "application/vnd.pypi.simple.v1+html",
        "application/vnd.pypi.simple.latest+html",
    }
)
NOT_AN_INDEX_HINT = (
    "the index URL, a proxy or a captive portal answered with a page that is not a simple "
    "index: check the index URL (matrix/sources.toml or --index), log in to the network or "
    "proxy if it asks you to, or use another mirror with --index NAME=URL"
)
EMPTY_HINT = (
    "a partial mirror or a cut-off page lists no files; check the index (or use another "
    "mirror with --index NAME=URL), or drop the project from that index's `projects` in "
    "matrix/sources.toml"
)


@dataclass(frozen=True)
class FileLink:
    filename: str
    url: str  # absolute, without fragment
    sha256: str | None = None
    requires_python: str | None = None
    upload_time: str | None = None  # ISO 8601 as published
    core_metadata: bool = False  # PEP 658/714 advertised
    yanked: bool = False
    core_metadata_sha256: str | None = None  # the PEP 658 file's hash, when the index states it

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
        self.forms = 0
        self.title: str | None = None
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")
        elif tag == "a":
            self.anchors.append(dict(attrs))
        elif tag == "form":
            self.forms += 1
        elif tag == "title" and self.title is None:
            self._in_title, self.title = True, ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title and self.title is not None:
            self.title += data


def _truthy_metadata(value: object) -> bool:
    if value is None or value is False:
        return False
    return not (isinstance(value, str) and value.lower() == "false")


def _metadata_sha256(value: object) -> str | None:
    """The sha256 of a PEP 658/714 value: ``"sha256=<hex>"`` (HTML) or ``{"sha256": …}``."""
    if isinstance(value, dict):
        sha = value.get("sha256")
        return sha.lower() if isinstance(sha, str) and sha else None
    if isinstance(value, str) and value.lower().startswith("sha256="):
        return value.split("=", 1)[1].strip().lower() or None
    return None


def _html(body: str, page_url: str) -> tuple[list[FileLink], _AnchorParser]:
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
                core_metadata_sha256=_metadata_sha256(meta) if has_meta else None,
            )
        )
    return links, parser


def parse_html(body: str, page_url: str) -> list[FileLink]:
    """Every link of a PEP 503 page (not only the project's files: see :func:`project_files`)."""
    return _html(body, page_url)[0]


def _shape_error(page_url: str, what: str) -> HarvestError:
    return HarvestError(
        f"{page_url}: not a PEP 691 project page ({what})",
        hint="the index (or a proxy in front of it) sent a malformed JSON page; retry later, "
        "or use another mirror with --index NAME=URL",
    )


def _optional(entry: dict[str, Any], key: str, types: tuple[type, ...], where: str,
              page_url: str) -> Any:
    value = entry.get(key)
    if value is not None and not isinstance(value, types):
        wanted = " or ".join(t.__name__ for t in types)
        raise _shape_error(page_url, f"{where}: {key!r} is {type(value).__name__}, not {wanted}")
    return value


def parse_json(body: str, page_url: str) -> list[FileLink]:
    """The files of a PEP 691 page; a document of the wrong shape raises HarvestError."""
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise _shape_error(page_url, f"invalid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise _shape_error(page_url, f"the document is a {type(doc).__name__}, not an object")
    if "files" not in doc:
        raise _shape_error(page_url, "no 'files' key")
    files = doc["files"]
    if not isinstance(files, list):
        raise _shape_error(page_url, f"'files' is {type(files).__name__}, not a list")
    links = []
    for n, entry in enumerate(files):
        where = f"files[{n}]"
        if not isinstance(entry, dict):
            raise _shape_error(page_url, f"{where} is {type(entry).__name__}, not an object")
        href = entry.get("url")
        if not isinstance(href, str) or not href:
            raise _shape_error(page_url, f"{where} has no 'url' string")
        _optional(entry, "filename", (str,), where, page_url)
        hashes = _optional(entry, "hashes", (dict,), where, page_url) or {}
        sha = hashes.get("sha256")
        if sha is not None and not isinstance(sha, str):
            raise _shape_error(page_url, f"{where}: hashes.sha256 is not a string")
        requires_python = _optional(entry, "requires-python", (str,), where, page_url)
        upload_time = _optional(entry, "upload-time", (str,), where, page_url)
        _optional(entry, "yanked", (bool, str), where, page_url)
        key = "core-metadata" if "core-metadata" in entry else "dist-info-metadata"
        meta = _optional(entry, key, (bool, dict, str), where, page_url)
        if isinstance(meta, dict) and not all(isinstance(v, str) for v in meta.values()):
            raise _shape_error(page_url, f"{where}: {key!r} hashes are not strings")
        link = _link(
            page_url,
            urljoin(page_url, href),
            requires_python=requires_python or None,
            upload_time=upload_time or None,
            core_metadata=_truthy_metadata(meta),
            yanked=bool(entry.get("yanked")),
            core_metadata_sha256=_metadata_sha256(meta),
        )
        if sha and not link.sha256:
            link = replace(link, sha256=sha.lower())
        links.append(link)
    return links


def is_project_file(filename: str, project: str) -> bool:
    """Whether ``filename`` parses as a wheel or an sdist of ``project``."""
    try:
        if filename.endswith(".whl"):
            name = parse_wheel_filename(filename)[0]
        else:
            name = parse_sdist_filename(filename)[0]
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion, ValueError):
        return False
    return canonicalize_name(name) == canonicalize_name(project)


def project_url(index_url: str, project: str) -> str:
    return index_url.rstrip("/") + "/" + canonicalize_name(project) + "/"


def _redirect_note(requested: str, final: str) -> str:
    if urlsplit(final).netloc.lower() != urlsplit(requested).netloc.lower():
        return f"; redirected to {final} (a captive portal or a login proxy?)"
    return ""


def parse_page(
    body: bytes, content_type: str, project: str, requested_url: str, page_url: str
) -> list[FileLink]:
    """The links of a project page, after checking that it is one (see the module docstring).

    An index page listing no files at all returns ``[]``: the caller decides whether that is
    acceptable (see :mod:`envgen.harvest.update`). ``page_url`` is the URL after redirects."""
    media = content_type.split(";")[0].strip().lower()
    redirect = _redirect_note(requested_url, page_url)
    if media not in JSON_TYPES and media not in HTML_TYPES:
        shown = f"Content-Type {media!r}" if media else "no Content-Type"
        raise HarvestError(
            f"{requested_url}: not an index page: the server answered 200 with {shown} and "
            f"{len(body)} bytes (expected text/html or {JSON_TYPE}){redirect}",
            hint=NOT_AN_INDEX_HINT,
        )
    text = body.decode("utf-8", errors="replace")
    name = canonicalize_name(project)
    if media in JSON_TYPES:
        try:
            links = parse_json(text, page_url)
        except HarvestError as exc:
            raise HarvestError(
                exc.message.replace(page_url, requested_url, 1) + redirect, hint=exc.hint
            ) from exc
        files = [link for link in links if is_project_file(link.filename, project)]
        if links and not files:
            raise HarvestError(
                f"{requested_url}: not a project page of {name}: no {name} wheel or sdist among "
                f"its {len(links)} files{redirect}",
                hint=NOT_AN_INDEX_HINT,
            )
        return links
    links, parser = _html(text, page_url)
    files = [link for link in links if is_project_file(link.filename, project)]
    if links and not files:
        looks = []
        if parser.title and parser.title.strip():
            looks.append(f"titled {' '.join(parser.title.split())[:80]!r}")
        if parser.forms:
            looks.append(f"{parser.forms} form{'s' if parser.forms > 1 else ''}")
        shape = f"an HTML page ({', '.join(looks)})" if looks else "an HTML page"
        raise HarvestError(
            f"{requested_url}: not a project page of {name}: {shape} with no {name} wheel or "
            f"sdist among its {len(links)} link{'s' if len(links) != 1 else ''}{redirect}",
            hint=NOT_AN_INDEX_HINT,
        )
    return links


def empty_page_error(url: str, project: str, index_name: str) -> HarvestError:
    return HarvestError(
        f"{url}: the page of {canonicalize_name(project)} on index {index_name!r} lists no "
        "files at all (an empty or cut-off page, or a partial mirror)",
        hint=EMPTY_HINT,
    )


def fetch_project(
    http: Http | None, cache: Cache, index_url: str, project: str
) -> list[FileLink] | None:
    """The files of ``project`` on the index; ``None`` when the index has no such project
    (404/410); ``[]`` for an index page that lists no files. A page that is not an index page
    raises HarvestError and is not cached."""
    url = project_url(index_url, project)
    cached = cache.get_page(url, ACCEPT)
    store = None
    if cache.offline or http is None:
        if cached is None:
            raise cache.offline_miss(url)
        body, meta = cached
    else:
        headers = {"Accept": ACCEPT, **revalidation_headers(cached)}
        response = http.get(url, headers=headers)
        if response is None:
            return None
        if response.status_code == 304 and cached:
            body, meta = cached
        else:
            body = response.content
            meta = page_meta(response, url)
            store = (body, meta)
    links = parse_page(body, meta.get("content_type", ""), project, url, meta.get("url") or url)
    if store is not None:  # only a page that passed the checks is cached
        cache.put_page(url, ACCEPT, *store)
    return links
