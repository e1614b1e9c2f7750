"""Remove conda packages from a prefix by their conda-meta records (no conda needed).

Copied from envgen's images/prune-conda.py by `envgen make --image`; the Dockerfile's pruned
stage runs it so the runtime image carries no compilers. Standard library only.
Usage: python prune-conda.py PREFIX NAME [NAME ...]   (names are exact conda package names)
"""

from __future__ import annotations

import json
import pathlib
import sys


def prune(prefix: pathlib.Path, names: set[str]) -> list[str]:
    removed = []
    for record in sorted((prefix / "conda-meta").glob("*.json")):
        meta = json.loads(record.read_text(encoding="utf-8"))
        if meta.get("name") not in names:
            continue
        for rel in meta.get("files", []):
            path = prefix / rel
            if path.is_symlink() or path.is_file():
                path.unlink()
        record.unlink()
        removed.append(f"{meta['name']}-{meta.get('version', '?')}")
    return removed


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: prune-conda.py PREFIX NAME [NAME ...]", file=sys.stderr)
        return 2
    removed = prune(pathlib.Path(argv[0]), set(argv[1:]))
    print(f"pruned {len(removed)} build-only packages: {' '.join(removed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
