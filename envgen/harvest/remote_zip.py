"""Read members of a remote zip (a wheel) with HTTP Range requests.

:class:`RangeFile` is a seekable, read-only file object over Range GETs that ``zipfile``
accepts. The first request asks for the last 64 KiB (``bytes=-65536``), which holds the zip's
central directory for most wheels and tells the file size (``Content-Range``). A server that
ignores Range answers 200 with the whole file; then the body is used as it is.
Listing a 20 MB wheel this way costs a few KB; reading one member costs its compressed size.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable

from envgen.errors import HarvestError
from envgen.harvest.http import Http

TAIL = 65536
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")


class RangeFile(io.RawIOBase):
    def __init__(self, http: Http, url: str, tail: bytes, size: int) -> None:
        super().__init__()
        self.http, self.url, self.size = http, url, size
        self._tail, self._tail_start = tail, size - len(tail)
        self.pos = 0
        self.fetched = len(tail)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = self.size - self.pos
        n = min(n, self.size - self.pos)
        if n <= 0:
            return b""
        start, end = self.pos, self.pos + n
        if start >= self._tail_start:
            data = self._tail[start - self._tail_start : end - self._tail_start]
        else:
            response = self.http.get(self.url, headers={"Range": f"bytes={start}-{end - 1}"})
            if response is None or response.status_code != 206 or len(response.content) != n:
                got = "404" if response is None else f"HTTP {response.status_code}"
                raise HarvestError(
                    f"{self.url}: range request bytes={start}-{end - 1} failed ({got})",
                    hint="the server stopped honouring Range requests; retry later",
                )
            data = response.content
            self.fetched += len(data)
        self.pos += len(data)
        return data

    def readinto(self, buffer) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def open_remote_zip(http: Http, url: str) -> zipfile.ZipFile:
    response = http.get(url, headers={"Range": f"bytes=-{TAIL}"})
    if response is None:
        raise HarvestError(f"{url}: 404 Not Found", hint="the index lists a file it does not serve")
    try:
        if response.status_code == 206:
            match = _CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
            if not match:
                raise HarvestError(f"{url}: 206 answer without a usable Content-Range")
            handle: io.IOBase = RangeFile(http, url, response.content, int(match[3]))
        else:  # Range ignored: we already hold the whole file
            handle = io.BytesIO(response.content)
        return zipfile.ZipFile(handle)
    except zipfile.BadZipFile as exc:
        raise HarvestError(f"{url}: not a readable zip/wheel ({exc})") from exc


def read_members(http: Http, url: str, want: Callable[[str], bool]) -> dict[str, bytes]:
    """Members whose name satisfies ``want``, read from the remote wheel at ``url``."""
    with open_remote_zip(http, url) as archive:
        try:
            return {name: archive.read(name) for name in archive.namelist() if want(name)}
        except (zipfile.BadZipFile, OSError) as exc:
            raise HarvestError(f"{url}: could not read wheel members ({exc})") from exc
