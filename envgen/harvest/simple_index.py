"""Read a project's file list from a simple repository API page (PEP 503 HTML or PEP 691 JSON).

Input: an index URL and a project (:func:`fetch_project`), or a page's bytes
(:func:`parse_page`). Output: the page's :class:`FileLink` list. The page is requested with
content negotiation (JSON preferred, HTML accepted), cached by :mod:`envgen.harvest.cache`,
and parsed by what the server actually sent, with ``pypi-simple``: links are made absolute
against the page URL (PyTorch's relative ``../../whl/cu121/torch-….whl`` hrefs), and
``#sha256=`` fragments, PEP 592 yanking, PEP 658/714 metadata availability (and the metadata
file's own sha256) and PEP 700 upload times are kept. Two attributes pypi-simple does not read
are read here: PEP 658's first name ``data-dist-info-metadata`` (PyTorch's index) and the
upload time some HTML indexes state (``data-upload-time``).

A page is checked before it is used or cached: a 200 answer that is not an index page (a
proxy's login page, a captive portal, a text/plain error, a PEP 691 document of the wrong
shape, an HTML page without a single file of the project) raises
:class:`~envgen.errors.HarvestError` naming the URL, what the page looked like and where it
was redirected to, instead of reading as "this project has no files".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote, urldefrag, urlsplit

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion

from envgen.errors import HarvestError
from envgen.harvest.cache import Cache, Page, fetch_page
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
MALFORMED_HINT = (
    "the index (or a proxy in front of it) sent a malformed JSON page; retry later, or use "
    "another mirror with --index NAME=URL"
)
_METADATA = ("data-core-metadata", "data-dist-info-metadata")  # PEP 714's name, PEP 658's


@dataclass(frozen=True)
class FileLink:
    filename: str
    url: str  # absolute, without fragment
    sha256: str | None = None
    requires_python: str | None = None
    upload_time: str | None = None  # ISO 8601
    core_metadata: bool = False  # PEP 658/714 advertised
    yanked: bool = False
    core_metadata_sha256: str | None = None  # the PEP 658 file's hash, when the index states it

    @property
    def uploaded(self) -> str | None:
        return self.upload_time[:10] if self.upload_time else None


def _file_link(package: Any, **fields: Any) -> FileLink:
    """A pypi-simple ``DistributionPackage`` as a FileLink (file name from the URL, as the
    harvested records have always had it)."""
    url = urldefrag(package.url)[0]
    sha = package.digests.get("sha256")
    meta_sha = (package.metadata_digests or {}).get("sha256")
    return FileLink(
        filename=unquote(url.rsplit("/", 1)[-1]),
        url=url,
        sha256=sha.lower() if sha else None,
        requires_python=package.requires_python or None,
        core_metadata=bool(package.has_metadata),
        yanked=package.is_yanked,
        core_metadata_sha256=meta_sha.lower() if meta_sha else None,
        **fields,
    )


def _repo_version_error(page_url: str, exc: Exception) -> HarvestError:
    return HarvestError(f"{page_url}: not a usable simple index page ({exc})",
                        hint="envgen reads simple API version 1 (PEP 629); use a mirror that "
                        "serves it, with --index NAME=URL")


def parse_html(body: str | bytes, page_url: str) -> list[FileLink]:
    """Every link of a PEP 503 page (not only the project's files: see :func:`project_files`)."""
    from pypi_simple import DistributionPackage, Link, RepositoryPage
    from pypi_simple.errors import UnsupportedRepoVersionError

    try:
        page = RepositoryPage.from_html(body, page_url)
    except (UnsupportedRepoVersionError, InvalidVersion) as exc:
        raise _repo_version_error(page_url, exc) from None
    links = []
    for link in page.links:
        if not link.attrs.get("href"):  # an empty href names no file
            continue
        value = next((link.attrs[a] for a in _METADATA if a in link.attrs), None)
        if value is not None:  # pypi-simple reads the PEP 714 name only
            link = Link(link.text, link.url, {**link.attrs, _METADATA[0]: value})
        found = _file_link(DistributionPackage.from_link(link),
                           upload_time=link.get_str_attrib("data-upload-time") or None)
        if value == "":  # a bare attribute: metadata available, no hash stated
            found = replace(found, core_metadata=True)
        links.append(found)
    return links


def _shape_error(page_url: str, what: str) -> HarvestError:
    return HarvestError(f"{page_url}: not a PEP 691 project page ({what})", hint=MALFORMED_HINT)


def _where(loc: tuple[Any, ...]) -> str:
    """pydantic's ``("files", 0, "hashes")`` as ``files[0].hashes``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


def parse_json(body: str | bytes, page_url: str) -> list[FileLink]:
    """The files of a PEP 691 page; a document of the wrong shape raises HarvestError naming
    the fields pypi-simple's model refused."""
    from pydantic import ValidationError
    from pypi_simple import ProjectPage
    from pypi_simple.errors import UnsupportedRepoVersionError

    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise _shape_error(page_url, f"invalid JSON: {exc}") from exc
    files = doc.get("files") if isinstance(doc, dict) else None
    for entry in files if isinstance(files, list) else ():
        if isinstance(entry, dict) and "core-metadata" not in entry and (
                "dist-info-metadata" in entry):  # PEP 714: the PEP 658 name, when alone
            entry["core-metadata"] = entry["dist-info-metadata"]
    try:
        page = ProjectPage.from_json_data(doc, page_url)
    except ValidationError as exc:
        problems = [f"{_where(e['loc'])}: {e['msg']}" if e["loc"] else e["msg"]
                    for e in exc.errors()[:3]]
        raise _shape_error(page_url, "; ".join(problems)) from None
    except (UnsupportedRepoVersionError, InvalidVersion) as exc:
        raise _repo_version_error(page_url, exc) from None
    return [_file_link(package, upload_time=package.upload_time.isoformat()
                       if package.upload_time else None) for package in page.packages]


def _looks(body: bytes) -> str:
    """What an HTML page that is not an index page looks like: its title and forms."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(body, "html.parser")
    looks = []
    title = soup.title.get_text() if soup.title else ""
    if title.strip():
        looks.append(f"titled {' '.join(title.split())[:80]!r}")
    forms = len(soup.find_all("form"))
    if forms:
        looks.append(f"{forms} form{'s' if forms > 1 else ''}")
    return f"an HTML page ({', '.join(looks)})" if looks else "an HTML page"


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
    links = parse_html(text, page_url)
    files = [link for link in links if is_project_file(link.filename, project)]
    if links and not files:
        raise HarvestError(
            f"{requested_url}: not a project page of {name}: {_looks(body)} with no {name} "
            f"wheel or sdist among its {len(links)} link{'s' if len(links) != 1 else ''}"
            f"{redirect}",
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

    def parse(page: Page) -> list[FileLink]:
        return parse_page(page.body, page.content_type, project, url, page.url)

    return fetch_page(http, cache, url, ACCEPT, parse)
