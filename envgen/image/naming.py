"""Image names: <registry>/<repository>:<tag> from curated/images.toml [naming], plus the
content tag `envgen build` looks for before building."""

from __future__ import annotations

import re
from dataclasses import dataclass

from envgen.errors import UsageError
from envgen.facts.images import Naming
from envgen.validate import registry as check_registry

_TAG_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPO = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")


@dataclass(frozen=True)
class ImageName:
    repository: str  # registry/path/name, without tag
    tag: str  # the human tag: <fw>-torch<t>-cu<c>-py<p>-<os>

    def ref(self, tag: str | None = None) -> str:
        return f"{self.repository}:{tag or self.tag}"

    def content_tag(self, build_hash: str) -> str:
        """<tag>-<12 hex of the build hash>: the tag `envgen build` skips on."""
        return f"{self.tag}-{build_hash.removeprefix('sha256:')[:12]}"[:128]


def image_name(combo, naming: Naming, registry: str | None) -> ImageName:
    """``<registry>/<framework>:<fw>-torch<t>-cu<c>-py<p>-<os>`` (registry: --registry, else
    [naming] local_registry)."""
    arch = combo.platform.split("-", 1)[1]
    values = {
        "framework": combo.framework, "framework_version": combo.framework_version,
        "torch": combo.torch, "cuda": combo.cuda.replace(".", ""), "python": combo.python,
        "os": combo.os.replace("-", ""), "arch": "" if arch == "x86_64" else f"-{arch}",
    }
    repo = naming.repository.format(**values).lower()
    tag = _TAG_UNSAFE.sub("_", naming.tag.format(**values)).lstrip(".-")[:128]
    if not _REPO.match(repo):
        raise UsageError(f"image repository {repo!r} is not a valid name",
                         hint="fix [naming] repository in curated/images.toml")
    prefix = check_registry(registry) if registry else naming.local_registry
    return ImageName(repository=f"{prefix}/{repo}", tag=tag)
