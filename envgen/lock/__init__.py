"""The lock stage: a resolved combination → its locked environment.

Input: facts, a Combination, LockOptions (flavor, sources) and the matrix's index URLs.
Output: ``solve()`` → Solved (conda part with py-rattler, pip part with uv, the build
dependencies of its sdists with uv, the toolchain promise checked); ``finish()`` → LockResult
(file name → text, lock hash, typed Manifest); ``write_lock()`` puts the files on disk
atomically (all in ``pipeline``). ``install`` makes an environment of a lock. Flavors:
envgen/lock/flavors.py. This stage never imports the image stage: envgen.image adds its files
through ``finish(image=…)``.

The names below load their module on first use (PEP 562): `envgen install` needs the manifest
and the installer, not the solvers (py-rattler, uv's resolver, packaging's pylock).
"""

from __future__ import annotations

_WHERE = {
    "LockOptions": "plan", "LockPlan": "plan", "make_plan": "flavors",
    "MANIFEST": "manifest", "Manifest": "manifest", "read_manifest": "manifest",
    "Solved": "files", "lock_hash": "files", "render": "files",
    "LockResult": "pipeline", "solve": "pipeline", "finish": "pipeline", "lock": "pipeline",
    "write_lock": "pipeline", "tool_versions": "pipeline", "_check_toolchain": "pipeline",
}

__all__ = ["LockOptions", "LockResult", "Manifest", "Solved", "finish", "lock", "read_manifest",
           "solve", "write_lock"]


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'envgen.lock' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"envgen.lock.{module}"), name)
