"""Real full and read-only filesystems for the fault suite: small tmpfs mounts (root only).

Not root: the test is skipped with the reason. Root, but the mount fails (a container without
CAP_SYS_ADMIN): the test fails, so CI never passes without having run it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(path: Path, *, size_kb: int = 1024, readonly: bool = False) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs (a real full or read-only filesystem) needs root")
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size_kb}k" + (",ro" if readonly else "")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"mount -t tmpfs failed: {proc.stderr}"
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def fill(path: Path) -> None:
    """Fill the filesystem of ``path`` completely (ENOSPC for any further write)."""
    with contextlib.suppress(OSError), open(path / "filler", "wb") as handle:
        while True:
            handle.write(b"\0" * 4096)
            handle.flush()
