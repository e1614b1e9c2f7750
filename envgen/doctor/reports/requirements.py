"""Lines that say an installed package does not satisfy another's requirement.

Input: the cleaned lines and the line numbers other parsers took. Output: one
``conflicts.<n>`` fact per line (package, version, requires, have: the shape of ``pip check``'s
conflicts, :class:`envgen.doctor.snapshot.Conflict`) and ``errors.requirement`` = the first such
line, so the judge ranks ``dependency_conflict`` first and quotes it. Formats, each as its
source prints it:

- ``pip check``: "deepspeed 0.9.0 has requirement torch>=1.9, but you have torch 1.8.0." (older
  pips' install warning: "…, but you'll have torch 1.8.0 which is incompatible.") and
  "transformers 4.30.0 requires tokenizers>=0.13, which is not installed." (pip's
  src/pip/_internal/commands/check.py);
- pip's resolver after an install: "transformers 4.14.1 requires deepspeed>=0.5.7, but you have
  deepspeed 0.5.3 which is incompatible." (src/pip/_internal/commands/install.py,
  ``_warn_about_conflicts``);
- transformers' / accelerate's ``require_version`` at import: "ImportError:
  deepspeed>=0.10.0,<=0.16.9 is required for a normal functioning of this module, but found
  deepspeed==0.17.2." (transformers src/transformers/utils/versions.py ``_compare_versions``);
  the requiring package is not named there (``package`` None).

A prefix before the message (``[rank2]: ``, ``ERROR: ``, a quote) is allowed.
"""

from __future__ import annotations

import re

from envgen.doctor.reports._lines import Extracted, Line, fact

FORMAT = "error"
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_VERSION = r"[0-9][\w.+!-]*?"
_HAS = re.compile(rf"(?:^|[\s:>])({_NAME}) ({_VERSION}) has requirement (.+?), but you(?:'ll)? "
                  rf"have ({_NAME}) ({_VERSION})(?: which is incompatible)?\.?\s*$")
_MISSING = re.compile(rf"(?:^|[\s:>])({_NAME}) ({_VERSION}) requires (.+?), which is not "
                      r"installed\.?\s*$")
_RESOLVER = re.compile(rf"(?:^|[\s:>])({_NAME}) ({_VERSION}) requires (.+?), but you have "
                       rf"({_NAME}) ({_VERSION}) which is incompatible\.?\s*$")
_REQUIRED = re.compile(rf"(?:^|[\s:>])({_NAME}(?:\[[\w,.-]+\])?\s*(?:[<>=!~]=?=?)\s*[^\s]+?) is "
                       rf"required for a normal functioning of this module, but found "
                       rf"({_NAME})==({_VERSION})\.?(?:\s|$)")


def parse(lines: list[Line], claimed: set[int]) -> list[Extracted]:
    out: list[Extracted] = []
    for line in lines:
        if line.number in claimed:
            continue
        conflict = _conflict(line.text)
        if conflict is None:
            continue
        claimed.add(line.number)
        out.append(fact(line, f"conflicts.{len(out)}", conflict, FORMAT))
        if len(out) == 1:
            out.append(fact(line, "errors.requirement", line.source[:300], FORMAT))
    return out


def _conflict(text: str) -> dict | None:
    """The conflict ``text`` states ({package, version, requires, have}), or None."""
    m = _RESOLVER.search(text) or _HAS.search(text)
    if m:
        return {"package": m.group(1), "version": m.group(2), "requires": m.group(3).strip(),
                "have": m.group(5)}
    m = _MISSING.search(text)
    if m:
        return {"package": m.group(1), "version": m.group(2), "requires": m.group(3).strip(),
                "have": None}
    m = _REQUIRED.search(text)
    if m:
        return {"package": None, "version": None,
                "requires": re.sub(r"\s+", "", m.group(1)), "have": m.group(3)}
    return None
