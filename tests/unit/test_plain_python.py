"""envgen starts with plain Python (issue 40): standard dataclasses, hashlib, pickle and signal,
the interpreter's normal exit — no CPython-private modules or exit paths. The watchdogs in
envgen/inside (scripts that run on targets) keep theirs."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "envgen"
PRIVATE = re.compile(
    r"(?:import|from) _(pickle|signal|sha256|sha2)\b|_ncallbacks|os\._exit|gc\.freeze")


def test_no_private_modules_or_exit_tricks():
    found = [f"{path.relative_to(PACKAGE.parent)}:{n}: {line.strip()}"
             for path in sorted(PACKAGE.rglob("*.py"))
             if "inside" not in path.relative_to(PACKAGE).parts[:1]
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if PRIVATE.search(line)]
    assert found == []


def test_value_types_are_standard_dataclasses():
    assert not (PACKAGE / "record.py").exists()
    import dataclasses

    from envgen.facts.model import Facts, TorchBuild
    from envgen.resolve import Combination, Request

    for cls in (Facts, TorchBuild, Combination, Request):
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
        assert "__slots__" in cls.__dict__
