"""conda-lock's content hash of a lock's inputs, computed by conda-lock itself.

Input: the texts of environment.yml and virtual-packages.yml (the target's virtual packages in
conda-lock's ``--virtual-package-spec`` format) and the platform. Output: the hash
``conda-lock lock -f environment.yml --virtual-package-spec virtual-packages.yml -p PLATFORM``
records as ``metadata.content_hash[PLATFORM]``, so conda-lock sees the lock as current
(``--check-input-hash``). conda-lock's own parser and hash function do the work: its hash
covers pydantic dumps of its models and its fake repodata of the virtual packages, which only
conda-lock can reproduce exactly.

conda-lock maps PyPI names to conda names with a mapping it downloads; environment.yml's only
mapped name is the conda package ``pip`` (pip requirements keep their PyPI names), which every
mapping maps to itself, so an empty local mapping gives the same hash without a download.

Importing conda-lock takes ~0.9 s (pydantic models, its vendored conda), more than the rest of a
warm ``envgen make``; so each hash is remembered in the user's cache
(``<cache>/conda-lock-hash/``), keyed by conda-lock's version, the platform and both texts,
and conda-lock is imported only for inputs it has not hashed before. Hand-written (reason: a
few lines over envgen.atomic; no library caches one function's result on disk by its inputs'
hash). A cache that cannot be read or written is ignored.
"""

from __future__ import annotations

import contextlib
import io
import logging
import tempfile
from pathlib import Path

KEEP = 256  # remembered hashes (one per distinct lock input); the oldest go


def content_hash(environment_yml: str, virtual_packages_yml: str, platform: str) -> str:
    """The hash (see the module docstring); from the cache when these inputs were hashed."""
    path = _cached(environment_yml, virtual_packages_yml, platform)
    try:
        if path is not None:
            found = path.read_text(encoding="ascii").strip()
            if found and len(found) <= 128 and found.isalnum():
                return found
    except (OSError, UnicodeDecodeError):
        pass
    value = compute(environment_yml, virtual_packages_yml, platform)
    if path is not None:
        _remember(path, value)
    return value


def _cached(environment_yml: str, virtual_packages_yml: str, platform: str) -> Path | None:
    """Where these inputs' hash is remembered (None: no conda-lock version or cache dir)."""
    import hashlib
    from importlib.metadata import PackageNotFoundError, version

    try:
        from envgen.config import cache_root

        key = "\0".join(["1", version("conda-lock"), platform, environment_yml,
                         virtual_packages_yml])
        return cache_root() / "conda-lock-hash" / hashlib.sha256(key.encode()).hexdigest()
    except PackageNotFoundError:  # conda-lock not installed: compute() says so
        return None
    except Exception:  # no usable cache directory (a bad ENVGEN_CACHE_DIR): no cache
        return None


def _remember(path: Path, value: str) -> None:
    try:
        from envgen.atomic import write_file

        path.parent.mkdir(parents=True, exist_ok=True)
        write_file(path, value.encode("ascii"), durable=False)
        kept = sorted(path.parent.iterdir(), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for old in kept[KEEP:]:
            old.unlink(missing_ok=True)
    except Exception:  # only ever saves time
        return


def compute(environment_yml: str, virtual_packages_yml: str, platform: str) -> str:
    """The hash, computed by conda-lock now."""
    # conda-lock's poetry-core puts its _vendor folder first on sys.path, which holds an older
    # fastjsonschema (2.21.1: an enum of [1] accepts True); envgen's schema checks must keep
    # the installed one, so it is imported first
    import fastjsonschema  # noqa: F401
    from conda_lock.content_hash import compute_content_hashes
    from conda_lock.src_parser import make_lock_spec
    from conda_lock.virtual_package import virtual_package_repo_from_specification

    with tempfile.TemporaryDirectory(prefix="envgen-conda-lock-") as tmp:
        env, vp, mapping = (Path(tmp) / n for n in ("environment.yml",
                                                     "virtual-packages.yml", "mapping.json"))
        env.write_text(environment_yml, encoding="utf-8")
        vp.write_text(virtual_packages_yml, encoding="utf-8")
        mapping.write_text("{}", encoding="utf-8")
        quiet = logging.getLogger("conda_lock")
        level, quiet.level = quiet.level, logging.WARNING
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                spec = make_lock_spec(src_files=[env], platform_overrides=[platform],
                                      mapping_url=str(mapping))  # as `conda-lock lock` does
                repo = virtual_package_repo_from_specification(vp)
        finally:
            quiet.setLevel(level)
        return compute_content_hashes(spec, repo)[platform]
