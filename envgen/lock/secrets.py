"""Credentials in URLs never leave the process: no lock file, header, Dockerfile or image gets
them, and what envgen prints shows them masked.

A private index or channel is given with its credentials (``https://alice:TOKEN@host/simple``,
conda's ``https://host/t/TOKEN/channel``) so that the solve can read it; the lock records the
URL without them (``https://host/simple``), and installs take them where pip, uv and
py-rattler look on the installing machine: ``~/.netrc``, a keyring, conda's token in
rattler's auth file. Shown on a terminal, a URL keeps its shape with the secret masked the
way pip and uv mask it (``alice:****@``; a lone user name may be a token: ``****@``).
"""

from __future__ import annotations

import re
from dataclasses import replace
from urllib.parse import urlsplit, urlunsplit

_TOKEN_PATH = re.compile(r"/t/[^/]+/")  # anaconda.org-style channel tokens
_URL = re.compile(r"(?:https?|file)://[^\s'\"<>]+")


def _netloc(parts, userinfo: str) -> str:
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    return f"{userinfo}{host}{f':{parts.port}' if parts.port else ''}"


def public(url: str) -> str:
    """``url`` without any credentials: the user info and a conda ``/t/<token>/`` segment
    dropped (what a lock file may hold)."""
    if not url or "://" not in url:
        return url
    try:
        parts = urlsplit(url)
        _ = parts.port  # a malformed port: leave the text to the validators
    except ValueError:
        return url
    netloc = _netloc(parts, "") if "@" in parts.netloc else parts.netloc
    path = _TOKEN_PATH.sub("/", parts.path, count=1) if parts.path.startswith("/t/") else \
        parts.path
    return urlunsplit((parts.scheme, netloc, path, parts.query, parts.fragment))


def shown(url: str) -> str:
    """``url`` for a terminal or a log: the password (or a lone user name, which may be a
    token) and a conda token masked as ``****``."""
    if not url or "://" not in url:
        return url
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        user = parts.username if parts.password is not None else None
        netloc = _netloc(parts, f"{user}:****@" if user else "****@")
    path = _TOKEN_PATH.sub("/t/****/", parts.path, count=1) if parts.path.startswith("/t/") \
        else parts.path
    return urlunsplit((parts.scheme, netloc, path, parts.query, parts.fragment))


def shown_text(text: str) -> str:
    """Every URL in ``text`` (an error message, a tool's output) as :func:`shown` shows it."""
    return _URL.sub(lambda m: shown(m.group(0)), text) if "://" in text else text


def has_secret(url: str | None) -> bool:
    return bool(url) and public(url) != url


def public_text(text: str, urls) -> str:
    """``text`` (uv's pylock.toml, a rendered file) with the credentials of each of ``urls``
    removed wherever the URL, or a file under it, appears."""
    for url in urls:
        if has_secret(url):
            text = text.replace(url.rstrip("/"), public(url).rstrip("/"))
            parts = urlsplit(url)
            if parts.username is not None:  # the same host's files, under another path
                text = text.replace(parts.netloc + "/", _netloc(parts, "") + "/")
    return text


def public_solved(solved):
    """``solved`` (envgen.lock.files.Solved) with every URL public: the plan's indexes and
    channels, the options the regenerate command repeats, each locked file's URL, uv's
    pylock text. The solve itself used the full URLs."""
    options, plan = solved.options, solved.plan
    given = [options.index_url, *options.extra_index_urls, options.torch_index_url,
             *(options.channels or ()), options.channel_alias, plan.pip.index_url,
             *plan.pip.extra_index_urls, *(plan.conda.channels if plan.conda else ())]
    if not any(has_secret(u) for u in given if u):
        return solved
    urls = [u for u in given if u]

    def dist(d):
        return d if d is None else replace(d, url=public_text(d.url, urls))

    def pip(p):
        return replace(p, wheels=tuple(dist(w) for w in p.wheels), sdist=dist(p.sdist))

    conda_plan = plan.conda and replace(plan.conda,
                                        channels=tuple(public(c) for c in plan.conda.channels))
    plan = replace(plan, conda=conda_plan, pip=replace(
        plan.pip, index_url=public(plan.pip.index_url),
        extra_index_urls=tuple(public(u) for u in plan.pip.extra_index_urls)))
    options = replace(
        options, index_url=options.index_url and public(options.index_url),
        extra_index_urls=tuple(public(u) for u in options.extra_index_urls),
        torch_index_url=options.torch_index_url and public(options.torch_index_url),
        channels=options.channels and tuple(public(c) for c in options.channels),
        channel_alias=options.channel_alias and public(options.channel_alias))
    build = solved.build and replace(solved.build,
                                     packages=tuple(pip(p) for p in solved.build.packages))
    return replace(
        solved, plan=plan, options=options, pip=tuple(pip(p) for p in solved.pip),
        conda=tuple(replace(p, url=public_text(p.url, urls), channel=public_text(p.channel, urls))
                    for p in solved.conda),
        pylock=solved.pylock and public_text(solved.pylock, urls), build=build)
