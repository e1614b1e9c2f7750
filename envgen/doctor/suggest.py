"""The ``envgen make`` command that gives a coherent environment for what the snapshot holds:
the user's framework, GPU, driver and CUDA. The command is checked with the resolver before it
is offered: a request that nothing satisfies is loosened (first the CUDA, then the framework
version) until one resolves; when none does, there is no command.
"""

from __future__ import annotations

import shlex

from envgen.errors import EnvgenError
from envgen.facts.model import Facts
from envgen.resolve.request import Request

_CACHE: dict[tuple[Request, int], bool] = {}


def _resolves(request: Request, facts: Facts) -> bool:
    from envgen.resolve import iter_resolve

    key = (request, id(facts))
    if key not in _CACHE:
        try:
            next(iter(iter_resolve(request, facts, limit=1)))
            _CACHE[key] = True
        except (EnvgenError, StopIteration):
            _CACHE[key] = False
    return _CACHE[key]


def make_request(facts: Facts, *, framework: str | None, version: str | None = None,
                 cuda: str | None = None, gpu_arch: str | None = None,
                 driver: str | None = None, platform: str = "linux-x86_64") -> Request | None:
    """The request of ``envgen make --framework … [--framework-version …] [--cuda …]
    [--gpu-arch …] [--driver …]`` that resolves (loosened until one does), or None."""
    base = {"framework": framework, "gpu_arch": gpu_arch, "driver": driver,
            "platform": platform}
    tries = [{**base, "framework_version": version, "cuda": cuda},
             {**base, "framework_version": version},
             {**base, "cuda": cuda}, base,
             {k: v for k, v in base.items() if k != "driver"}]
    for values in tries:
        request = Request(**{k: v for k, v in values.items() if v is not None})
        if _resolves(request, facts):
            return request
    return None


def shell_command(request: Request) -> str:
    """``envgen make`` with ``request``'s options, each value quoted for a shell."""
    return " ".join(["envgen make", *(f"--{k.replace('_', '-')} {shlex.quote(str(v))}"
                                      for k, v in request.given().items())])

