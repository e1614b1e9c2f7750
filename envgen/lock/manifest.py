"""The lock manifest, ``envgen.lock.json``: its integrity hash, and reading it back safely.

The manifest records the combination, the sources, the lock hash and every other lock file's
sha256. Its own ``manifest_hash`` (sha256 of its canonical JSON without that key) makes an
edit of the manifest itself detectable, so `envgen install` and `envgen build` refuse a lock
whose manifest or files were changed after `envgen make` wrote them. The shape is checked
against ``envgen/schemas/lock-manifest.schema.json`` before any field is used.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from envgen.errors import DataError, UsageError

MANIFEST = "envgen.lock.json"
SCHEMA = 2
_SCHEMA_FILE = Path(__file__).resolve().parent.parent / "schemas" / "lock-manifest.schema.json"
REGENERATE_HINT = "regenerate the lock with the `envgen make` command in its files' headers"


def manifest_hash(doc: dict[str, Any]) -> str:
    """sha256 of the manifest's canonical JSON, ``manifest_hash`` itself left out."""
    body = {k: v for k, v in doc.items() if k != "manifest_hash"}
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()


@functools.cache
def _validator():
    import jsonschema

    schema = json.loads(_SCHEMA_FILE.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def _where(error) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)


def check_manifest(doc: Any, path: Path) -> dict[str, Any]:
    """``doc`` (parsed from ``path``) is a manifest of this schema that nobody edited."""
    if isinstance(doc, dict) and doc.get("schema") not in (None, SCHEMA):
        raise DataError(f"{path} has manifest schema {doc.get('schema')!r}; this envgen reads "
                        f"schema {SCHEMA}", hint=REGENERATE_HINT + " with this envgen")
    errors = sorted(_validator().iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        shown = "; ".join(f"{_where(e)}: {e.message[:160]}" for e in errors[:5])
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        raise DataError(f"{path} is not a valid envgen lock manifest: {shown}{more}",
                        hint=REGENERATE_HINT)
    if manifest_hash(doc) != doc["manifest_hash"]:
        raise DataError(f"{path} was modified after envgen wrote it (its content does not "
                        "match its manifest_hash)",
                        hint=REGENERATE_HINT + " instead of editing it")
    return doc


def read_manifest(lock_dir: Path) -> dict[str, Any]:
    """The checked manifest of ``lock_dir``; DataError/UsageError with the fix otherwise."""
    lock_dir = Path(lock_dir)
    path = lock_dir / MANIFEST
    if not lock_dir.is_dir():
        what = "does not exist" if not lock_dir.exists() else "is not a directory"
        raise UsageError(f"{lock_dir} {what}", hint="pass the directory `envgen make` wrote, "
                         "e.g. locks/<combination id>")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{lock_dir} is not an envgen lock directory (no {MANIFEST})",
                         hint="pass the directory `envgen make` wrote, "
                         "e.g. locks/<combination id>") from None
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}",
                        hint="check the file's permissions") from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{path} is not valid JSON ({exc})", hint=REGENERATE_HINT) from None
    return check_manifest(doc, path)
