"""Which cached-extension folders the doctor may print an ``rm -rf`` for.

A snapshot or a pasted report is text anyone can write, so a path in it is printed inside a
command only when it is a torch extension build folder by its shape: a direct child of the
snapshot's ``TORCH_EXTENSIONS_DIR`` (torch's flat layout) or ``…/torch_extensions/pyXY_…/NAME``
(its default cache), absolute, without ``.``, ``..`` or empty parts, and never ``/``, a home
directory or a folder of the operating system. Anything else gets the fix in words only.
"""

from __future__ import annotations

import os
import re

__all__ = ["removable"]

# top-level folders of the OS (FHS, macOS): never an extensions root, nor is anything under
# the first group
_SYSTEM = frozenset(("bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc",
                     "sbin", "sys", "usr", "System", "Library"))
_TOP = _SYSTEM | {"home", "Users", "root", "opt", "var", "srv", "mnt", "media", "run", "tmp",
                  "snap", "nix", "private", "Applications", "Volumes"}
_TAG = re.compile(r"py\d+_\w+")  # torch's build folder tag: py311_cu121, py312_cpu


def _parts(path: object) -> list[str] | None:
    """The components of an absolute, normal POSIX path of printable text, else None."""
    if not isinstance(path, str) or not path.startswith("/") or not path.isprintable():
        return None
    parts = path.rstrip("/").split("/")[1:]
    if not parts or any(p in ("", ".", "..") or p.startswith("~") for p in parts):
        return None
    return parts


def _home(parts: list[str]) -> bool:
    here = os.path.expanduser("~").rstrip("/")
    return (parts[0] in ("home", "Users") and len(parts) <= 2) or parts == ["root"] or \
        "/" + "/".join(parts) == here


def removable(path: object, extensions_dir: object = None) -> bool:
    """Whether ``rm -rf PATH`` removes one extension build folder and nothing else (as far as
    the text shows): see the module docstring. ``extensions_dir``: the snapshot's
    TORCH_EXTENSIONS_DIR, if set."""
    parts = _parts(path)
    if parts is None or len(parts) < 2 or _home(parts) or parts[0] in _SYSTEM:
        return False
    if len(parts) >= 4 and parts[-3] == "torch_extensions" and _TAG.fullmatch(parts[-2]):
        return True
    root = _parts(extensions_dir)
    return (root is not None and parts[:-1] == root and not _home(root)
            and not (len(root) == 1 and root[0] in _TOP))
