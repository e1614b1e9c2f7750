"""Read members of a remote zip (a wheel), checking its bytes where that is possible.

The first request asks for the last 64 KiB (``bytes=-65536``), which holds the zip's central
directory for most wheels and tells the file size (``Content-Range``). Then:

* the server ignored Range and answered 200 with the whole file: its sha256 is checked against
  the index's and the members are read from it (``verified: "sha256"``);
* the file is at most ``whole_limit`` bytes (``[refresh] max_whole_download_mb`` in
  ``matrix/sources.toml``; framework and nvcc wheels are far below it): the whole file is
  downloaded, its sha256 checked, and the members read from it (``"sha256"``);
* above the limit (multi-GB torch wheels): :class:`RangeFile`, a seekable read-only file over
  Range GETs that ``zipfile`` accepts, reads only the central directory and the wanted members.
  ``zipfile`` checks each member's CRC-32, but **the file's sha256 cannot be checked without
  all of its bytes**: such a record says ``verified: "range"``, honestly.

When the index states no sha256 there is nothing to check against: the members are read by
Range whatever the size and the record says ``"none"``. A mismatch raises
:class:`~envgen.errors.HarvestError` before any member is read.
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from collections.abc import Callable

from envgen.errors import HarvestError
from envgen.harvest import integrity
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


def open_remote_zip(
    http: Http, url: str, sha256: str | None = None, whole_limit: int = 0
) -> tuple[zipfile.ZipFile, str]:
    """``(archive, verified)``: the remote wheel opened for reading and how its bytes were
    checked (see the module docstring)."""
    response = http.get(url, headers={"Range": f"bytes=-{TAIL}"})
    if response is None:
        raise HarvestError(f"{url}: 404 Not Found", hint="the index lists a file it does not serve")
    try:
        if response.status_code == 206:
            match = _CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
            if not match:
                raise HarvestError(f"{url}: 206 answer without a usable Content-Range")
            size = int(match[3])
            if sha256 and size <= whole_limit:
                data = response.content
                if len(data) != size:  # the tail is not the whole file: download all of it
                    whole = http.get(url)
                    if whole is None:
                        raise HarvestError(
                            f"{url}: 404 Not Found",
                            hint="the index lists a file it does not serve",
                        )
                    data = whole.content
                verified = integrity.check(url, sha256, data)
                handle: io.IOBase = io.BytesIO(data)
            else:
                handle = RangeFile(http, url, response.content, size)
                verified = integrity.RANGE if sha256 else integrity.NONE
        else:  # Range ignored: we already hold the whole file
            verified = integrity.check(url, sha256, response.content)
            handle = io.BytesIO(response.content)
        return zipfile.ZipFile(handle), verified
    except (zipfile.BadZipFile, EOFError) as exc:
        raise HarvestError(
            f"{url}: not a readable zip/wheel ({exc})",
            hint="the index or a proxy served a corrupted file; retry, or use another mirror "
            "with --index NAME=URL",
        ) from exc


def read_members(
    http: Http,
    url: str,
    want: Callable[[str], bool],
    *,
    sha256: str | None = None,
    whole_limit: int = 0,
) -> tuple[dict[str, bytes], str]:
    """``(members, verified)``: the members whose name satisfies ``want``, read from the remote
    wheel at ``url`` (index sha256 ``sha256``), and how the bytes were checked."""
    archive, verified = open_remote_zip(http, url, sha256, whole_limit)
    with archive:
        try:
            members = {name: archive.read(name) for name in archive.namelist() if want(name)}
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:  # a bad CRC-32 too
            raise HarvestError(
                f"{url}: could not read wheel members ({exc})",
                hint="the index or a proxy served a corrupted file; retry, or use another "
                "mirror with --index NAME=URL",
            ) from exc
    return members, verified
