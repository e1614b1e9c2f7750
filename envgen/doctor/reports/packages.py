"""``pip list``, ``pip freeze``, ``pip show``, ``conda list`` output and conda's install plan.

Input: the cleaned lines and the line numbers other parsers took. Output: packages.NAME (and
frameworks.NAME for deepspeed, megatron-core and colossalai; torch for torch). pip freeze
lines are unambiguous ("name==1.0", "name @ file://…" and "-e git+…#egg=name": version
unknown, null). Column lists ("name  1.0" from pip list, "name  1.0  build  channel" from
conda list) count after their header ("Package  Version", "# Name  Version  Build  Channel")
or in a run of at least three such lines, so that prose is not read as a list; a row with a
conda build string ("py3.7_cpu_0": it ends in the build number) and a channel counts alone.
"""

from __future__ import annotations

import re

from envgen.doctor.reports._lines import Extracted, Line, fact, package_facts, version
from envgen.doctor.reports.collect_env import conda_package

_FREEZE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(\S+)$")
_DIRECT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])? @ (\S+)$")
_EDITABLE = re.compile(r"^-e \S*#egg=([A-Za-z0-9][A-Za-z0-9._-]*)")
_PIP_HEADER = re.compile(r"^Package\s+Version(?:\s+(?:Editable project location|Location))?\s*$")
_CONDA_HEADER = re.compile(r"^#\s*Name\s+Version\s+Build(?:\s+Channel)?\s*$")
# (conda list may print a features column between build and channel: "py3.7_cpu_0  [cpuonly]")
_ROW = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s+(\S+)(?:\s+(\S+))?(?:\s+\[[^\]\s]*\])?"
                  r"(?:\s+(\S+))?\s*$")
# conda's transaction plan ("The following NEW packages will be INSTALLED:"): "pytorch
# conda-forge/linux-64::pytorch-1.10.0-cpu_py37hf3cc979_0"
_PLAN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s+[\w.-]+/[\w-]+::([A-Za-z0-9._-]+)-"
                   r"(\d[\w.!+]*)-(\S+?)(?:\s+(?:None|--> \S+))?\s*$")
_RULE = re.compile(r"^-{3,}\s+-{3,}")
# ``pip show NAME``: "Name: torch" and on the next line "Version: 2.2.1"
_SHOW_NAME = re.compile(r"^Name:\s*([A-Za-z0-9][A-Za-z0-9._-]*)$")
_SHOW_VERSION = re.compile(r"^Version:\s*(\S+)$")
# a conda build string ends in its build number ("py3.7_cpu_0", "py3.10_cuda11.8_cudnn8.7.0_0"):
# a row with one and a channel is conda list's even alone, quoted in prose
_CONDA_BUILD = re.compile(r"[\w.]*_\d+")
# "ubuntu 16.04 / python 3.7 / pytorch 0.4.1 / cuda 9.0" written as lines: prose, not a list
_ENV_WORDS = {"ubuntu", "centos", "debian", "os", "python", "cuda", "cudnn", "gpu", "driver",
              "nvcc", "gcc", "nccl", "windows"}


def parse(lines: list[Line], claimed: set[int]) -> list[Extracted]:
    out: list[Extracted] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.number in claimed:
            i += 1
            continue
        shown = _SHOW_NAME.match(line.text)
        if shown and i + 1 < len(lines) and lines[i + 1].number not in claimed:
            value = _SHOW_VERSION.match(lines[i + 1].text)
            if value and version(value.group(1)):
                claimed.update((line.number, lines[i + 1].number))
                out += [fact(lines[i + 1], n, v, "pip_show")
                        for n, v in package_facts(shown.group(1), version(value.group(1)))]
                i += 2
                continue
        plan = _PLAN.match(line.text) if len(line.text) < 400 else None  # (bounded: 3 groups)
        if plan and plan.group(1) == plan.group(2):
            claimed.add(line.number)
            out.extend(conda_package(line, plan.group(1), version(plan.group(3)), plan.group(4),
                                     "conda_list"))
            i += 1
            continue
        freeze = _FREEZE.match(line.text) or _DIRECT.match(line.text) or \
            _EDITABLE.match(line.text)
        if freeze:
            claimed.add(line.number)
            value = version(freeze.group(2)) if freeze.re is _FREEZE else None
            out += [fact(line, n, v, "pip_freeze") for n, v in package_facts(freeze.group(1),
                                                                             value)]
            i += 1
            continue
        i = _columns(lines, i, claimed, out)
    return out


def _columns(lines: list[Line], i: int, claimed: set[int], out: list[Extracted]) -> int:
    """A pip list or conda list starting at ``i``: where the next scan starts."""
    header = _PIP_HEADER.match(lines[i].text) or _CONDA_HEADER.match(lines[i].text)
    start = i + 1 if header else i
    fmt = "conda_list" if header and header.re is _CONDA_HEADER else "pip_list"
    rows = []
    j = start
    while j < len(lines):
        text = lines[j].text
        if _RULE.match(text) or (text.startswith("#") and fmt == "conda_list"):
            j += 1
            continue
        row = _ROW.match(text)
        if not row or lines[j].number in claimed or not version(row.group(2)):
            break
        rows.append((lines[j], row))
        j += 1
    lone_conda = bool(rows) and all(_CONDA_BUILD.fullmatch(row.group(3) or "") and row.group(4)
                                    for _, row in rows)
    if not header and not lone_conda and (len(rows) < 3 or (
            not any(row.group(3) for _, row in rows) and any(
                row.group(1).lower() in _ENV_WORDS for _, row in rows))):  # (build column: conda)
        return i + 1
    if header:
        claimed.add(lines[i].number)
    def built(row: re.Match[str]) -> bool:  # a conda build column, not pip list's location
        return row.group(3) is not None and not row.group(3).startswith(("/", "C:", "c:"))

    block = fmt == "conda_list" or any(built(row) for _, row in rows)
    for line, row in rows:
        claimed.add(line.number)
        conda = block
        name, value = row.group(1), version(row.group(2))
        if conda:
            out.extend(conda_package(line, name, value, row.group(3) or "", "conda_list"))
        else:
            out.extend(fact(line, n, v, "pip_list") for n, v in package_facts(name, value))
    return max(j, i + 1)
