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
"""

from __future__ import annotations

import contextlib
import io
import logging
import tempfile
from pathlib import Path


def content_hash(environment_yml: str, virtual_packages_yml: str, platform: str) -> str:
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
