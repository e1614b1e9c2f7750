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

- pip's "ERROR: Ignored the following versions that require a different python version: 1.8.0
  Requires-Python <3.12,>=3.8; 1.9.0 Requires-Python <3.12,>=3.8" (pip's
  src/pip/_internal/resolution/resolvelib/factory.py, before "Could not find a version that
  satisfies the requirement …"): one ``requires_python.<name> <version>`` fact per version
  listed, the package named by the "No matching distribution found for NAME…" / "satisfies the
  requirement NAME…" line of the same paste, and ``errors.python_requires`` = that line.

- Python's "ImportError: cannot import name 'BUFSIZE' from 'numpy' (…/site-packages/numpy/
  __init__.py)" (CPython's Python/ceval.c ``import_from``): code written for another release
  of that package, when the package is an installed one (its path in site-packages or
  dist-packages) or torch; ``errors.import_name`` = the first such line. Python's "partially
  initialized module … (most likely due to a circular import)" is a bug in the code, and a
  module of the user's own (any other path) says nothing of versions: neither is read.

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


_IMPORT_NAME = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'(?: \(([^()]{1,300})\))?")


_IGNORED = re.compile(r"Ignored the following versions that require a different python "
                      r"version:\s*(.*)$", re.I)
_IGNORED_ONE = re.compile(rf"({_VERSION}) Requires-Python ([^;]+)")
_NO_DISTRIBUTION = re.compile(rf"(?:No matching distribution found for|satisfies the "
                              rf"requirement) ({_NAME})", re.I)


def parse(lines: list[Line], claimed: set[int]) -> list[Extracted]:
    out = _requires_python(lines, claimed) + _import_name(lines, claimed)
    conflicts = 0
    for line in lines:
        if line.number in claimed:
            continue
        conflict = _conflict(line.text)
        if conflict is None:
            continue
        claimed.add(line.number)
        out.append(fact(line, f"conflicts.{conflicts}", conflict, FORMAT))
        conflicts += 1
        if conflicts == 1:
            out.append(fact(line, "errors.requirement", line.source[:300], FORMAT))
    return out


def _import_name(lines: list[Line], claimed: set[int]) -> list[Extracted]:
    """The first "cannot import name 'X' from 'pkg' (path)" of an installed package or torch."""
    for line in lines:
        m = _IMPORT_NAME.search(line.text) if line.number not in claimed else None
        if m is None:
            continue
        path = (m.group(3) or "").replace("\\", "/")
        installed = "/site-packages/" in path or "/dist-packages/" in path
        if installed or m.group(2).split(".")[0] == "torch":
            claimed.add(line.number)
            start = max(0, line.source.find("cannot import name") - 40)
            return [fact(line, "errors.import_name", line.source[start:start + 300], FORMAT)]
    return []


def _requires_python(lines: list[Line], claimed: set[int]) -> list[Extracted]:
    """pip's list of the versions it skipped for their Requires-Python (the first such line)."""
    line = next((x for x in lines if x.number not in claimed and _IGNORED.search(x.text)), None)
    if line is None:
        return []
    skipped = _IGNORED_ONE.findall(_IGNORED.search(line.text).group(1))
    if not skipped:
        return []
    named = next((m for m in (_NO_DISTRIBUTION.search(x.text) for x in lines) if m), None)
    prefix = f"{named.group(1)} " if named else ""
    claimed.add(line.number)
    return [*(fact(line, f"requires_python.{prefix}{version}", spec.strip().rstrip("."), FORMAT)
              for version, spec in skipped),
            fact(line, "errors.python_requires", line.source[:300], FORMAT)]


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
