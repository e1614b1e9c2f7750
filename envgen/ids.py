"""Combination ids read back: ``deepspeed-0.19.8-torch2.15.0-cu132-py3.11-debian12-x86_64`` →
the request fields it encodes. (The resolver builds ids: envgen.resolve.combination.) A base
module, so the cells file, the records and the CLI parse ids without loading the resolver.
"""

from __future__ import annotations

import re

COMBINATION_ID = (  # compiled (and cached by re) on first use
    r"^(?P<framework>[a-z0-9][a-z0-9_.-]*?)-(?P<framework_version>\d[^-]*)"
    r"-torch(?P<torch>\d[^-]*)-cu(?P<cuda>\d{3,})-py(?P<python>\d+\.\d+t?)"
    r"-(?P<os_name>[a-z]+)(?P<os_version>\d[\d.]*)-(?P<arch>x86_64|aarch64)$")


def parse_combination_id(text: str) -> dict[str, str] | None:
    """The request fields a combination id encodes (the inverse of
    ``envgen.resolve.combination.combination_id``): framework, framework_version, torch, cuda
    ("13.2"), python, os ("debian-12"), platform ("linux-x86_64"); None if ``text`` does not
    have that shape."""
    m = re.match(COMBINATION_ID, text.strip())
    if not m:
        return None
    cu = m["cuda"]
    return {"framework": m["framework"], "framework_version": m["framework_version"],
            "torch": m["torch"], "cuda": f"{cu[:-1]}.{cu[-1]}", "python": m["python"],
            "os": f"{m['os_name']}-{m['os_version']}", "platform": f"linux-{m['arch']}"}
