"""Prove the framework's ops were compiled into the image (run by the Dockerfile's builder).

Copied from envgen's images/check-ops.py by `envgen make --image`. Standard library only.
Usage: python check-ops.py FRAMEWORK OP [OP ...]   exit 0: every op is there, 1: not.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys


def _files(package: str, pattern: str) -> list[pathlib.Path]:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return []
    root = pathlib.Path(next(iter(spec.submodule_search_locations)))
    return sorted(root.rglob(pattern))


def deepspeed(ops: list[str]) -> list[str]:
    """setup.py records what it built in git_version_info.installed_ops; each built op is a
    deepspeed/ops/**/<op>_op*.so (DeepSpeed's OpBuilder.absolute_name)."""
    from deepspeed.git_version_info import installed_ops

    problems = []
    for op in ops:
        libs = _files("deepspeed", f"{op}_op*.so")
        if not installed_ops.get(op):
            problems.append(f"{op}: not in deepspeed.git_version_info.installed_ops")
        elif not libs:
            problems.append(f"{op}: installed_ops says yes, but no {op}_op*.so in the package")
        else:
            print(f"  {op:24} {libs[0].relative_to(libs[0].parents[2])}")
    return problems


def _compiled(name: str):
    try:
        spec = importlib.util.find_spec(name)
    except ImportError:  # its parent package is missing
        return None
    return spec if spec is not None and (spec.origin or "").endswith(".so") else None


def modules(ops: list[str]) -> list[str]:
    """Each op is an importable extension module (dotted name) built into the package;
    "a|b" accepts the first of several names (a module renamed between releases)."""
    problems = []
    for op in ops:
        found = [spec for spec in map(_compiled, op.split("|")) if spec is not None]
        if not found:
            problems.append(f"{op.replace('|', ' or ')}: no compiled extension module")
        else:
            print(f"  {found[0].name:40} {found[0].origin}")
    return problems


CHECKS = {"deepspeed": deepspeed, "modules": modules}


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in CHECKS:
        print(f"usage: check-ops.py {{{','.join(CHECKS)}}} OP [OP ...]", file=sys.stderr)
        return 2
    print(f"compiled ops ({argv[0]}):")
    problems = CHECKS[argv[0]](argv[1:])
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
