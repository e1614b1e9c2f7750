"""GPU models named in prose: "on 8 H100s", "I configured the environment to run on RTX3090",
"GPU V100", "8x H100", "I have 4 A100 GPU".

Input: the cleaned lines, the line numbers other parsers took (a GPU in collect_env's or
nvidia-smi's own lines is theirs), and the GPU catalogue (matrix/curated/gpus.toml: lower-case
name or alias → its record). Output: one ``gpus`` fact, the catalogue's model, when the text
names exactly one model (format "prose"; its compute capability comes from the catalogue when
judged); several models ("works on A100, fails on V100") say no one GPU, so they are explain
only (``gpu_models``). Only names with a digit are looked for ("Orin" or "Grace Hopper" are
words of prose too), spaces and hyphens optional ("RTX3090", "rtx-3090") and a plural "s"
allowed; a name of three characters or fewer ("T4", "A2", "L40") counts only on a line that
says GPU, NVIDIA, Tesla, GeForce, RTX, Quadro or card. A number just before the name ("8x",
"4 x", or "have 4") says how many (1 to 64); without one the count is not said (one is kept).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from envgen.doctor.reports._lines import Extracted, Line, fact

FORMAT = "prose"
# how many, just before the name: "8x H100", "4 x A100", "8× A100", or a bare number after
# "have", "with", "on", "using" or at the line's start ("I have 4 A100 GPU", "on 8 H100s")
_COUNT = re.compile(r"(?:(?<![\w.])(\d{1,2})\s*[x×]\s*|(?:^|\b(?:have|with|on|using)\s+)"
                    r"(\d{1,2})\s+)$", re.I)
_CONTEXT = re.compile(r"\b(?:gpus?|nvidia|tesla|geforce|rtx|quadro|cards?)\b", re.I)
_EXAMPLE = re.compile(r"\[e\.g\.[^\]]*\]|\(e\.g\.[^)]*\)", re.I)


def _pattern(key: str) -> str:
    return r"[\s_-]?".join(re.escape(part) for part in key.split())


def _names(gpus: Mapping[str, Any]) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
    """(long names, short names) as alternations, longest first, matching whole words."""
    keys = sorted((k for k in gpus if any(c.isdigit() for c in k)), key=len, reverse=True)
    long = [_pattern(k) for k in keys if len(k) > 3]
    short = [_pattern(k) for k in keys if len(k) <= 3]

    def compiled(alts: list[str]) -> re.Pattern[str] | None:
        return re.compile(r"(?<![\w.])(" + "|".join(alts) + r")s?(?!\w)", re.I) if alts else None

    return compiled(long), compiled(short)


def _key(found: str, gpus: Mapping[str, Any]) -> str | None:
    """The catalogue key of a matched spelling ("RTX3090" → "rtx 3090")."""
    squashed = re.sub(r"[\s_-]", "", found.lower())
    for k in gpus:
        if re.sub(r"[\s_-]", "", k) == squashed:
            return k
    return None


def parse(lines: list[Line], claimed: set[int], *,
          gpus: Mapping[str, Any] | None = None) -> list[Extracted]:
    if not gpus:
        return []
    long, short = _names(gpus)
    seen: dict[str, Line] = {}  # the catalogue's model name → the first line naming it
    counts: dict[str, int] = {}  # the catalogue's model name → the first count stated
    for line in lines:
        if not line.text or (line.number in claimed and line.number != 1):
            continue
        text = _EXAMPLE.sub("", line.text)  # a template's "(e.g. A100)" names no GPU
        for pattern in (long, short):
            if pattern is None or (pattern is short and not _CONTEXT.search(text)):
                continue
            for m in pattern.finditer(text):
                key = _key(m.group(1), gpus)
                if key is not None:
                    seen.setdefault(gpus[key].name, line)
                    start = max(0, m.start() - 12)  # (a cut slice's start is no line start)
                    count = _COUNT.search(("\x00" if start else "") + text[start:m.start()])
                    if count and 0 < int(count.group(1) or count.group(2)) <= 64:
                        counts.setdefault(gpus[key].name, int(count.group(1) or count.group(2)))
    if len(seen) == 1:
        (name, line), = seen.items()
        count = counts.get(name)
        return [fact(line, "gpus", ({"name": name, "compute_capability": None},) * (count or 1),
                     FORMAT, note="the one GPU model the text names" + (
                         f", {count} of them" if count else " (how many: not said)"))]
    return [fact(line, "gpu_models", name, FORMAT, kept=False,
                 note="explain only: the text names several GPU models")
            for name, line in seen.items()]
