"""Values a shell offers on TAB for the request options (argcomplete completers): read from
the matrix when a completion is asked for, so they are the facts this envgen answers from."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from envgen.versions import dotted_key, parse_version


def _facts():
    from envgen.facts.matrix import Matrix

    return Matrix.locate().facts


def _values(axis: str, facts) -> Iterable[str]:
    if axis == "framework":
        return facts.framework_names
    if axis == "framework_version":
        return sorted({r.version for r in facts.frameworks}, key=parse_version, reverse=True)
    if axis == "torch":
        return sorted({b.version.split("+")[0] for b in facts.torch_builds},
                      key=parse_version, reverse=True)
    if axis == "cuda":
        return sorted({b.cuda for b in facts.torch_builds if b.cuda}, key=dotted_key,
                      reverse=True)
    if axis == "python":
        return sorted({p for b in facts.torch_builds for p in b.python})
    if axis == "os":
        return list(facts.oses)
    if axis == "gpu":
        return ["auto", *sorted({g.name for g in facts.gpus.values()})]  # auto: this machine's
    if axis == "driver":
        return ["auto"]  # a driver's version is the machine's own: only auto is offered
    if axis == "gpu_arch":
        return sorted({g.arch for g in facts.gpus.values()})
    raise ValueError(axis)


def fact_values(axis: str) -> Callable[..., list[str]]:
    """An argcomplete completer: the matrix's values of ``axis`` that start with the prefix
    (none when the matrix cannot be read: completion must never fail loudly)."""

    def complete(prefix: str = "", **_) -> list[str]:
        try:
            return [v for v in _values(axis, _facts()) if str(v).startswith(prefix)]
        except Exception:
            return []

    return complete


def flavors(prefix: str = "", **_) -> list[str]:
    """An argcomplete completer: the lock flavors (envgen.facts.model.Toolchain.FLAVORS)."""
    from envgen.facts.model import Toolchain

    return [f for f in Toolchain.FLAVORS if f.startswith(prefix)]
