"""The scripts that run inside a built image or a target env, never in envgen's own process.

Input: a script's file name; output: its path in this folder (shipped in the wheel as package
data). These files run under the image's or the env's Python, which has no envgen: each must
import only the standard library, torch and the framework (and nothing newer than the oldest
Python a combination uses).

- ``check-ops.py``, ``sitecustomize.py``, ``prune-conda.py``: copied into a lock's ``image/``
  folder by `envgen make --image` (same names there) and run by the Dockerfile's builder.
- ``ops.py``, ``smoke.py`` with ``checks_common.py`` and one ``checks_<framework>.py`` per
  framework: started by envgen.verify.launch in the target (this folder mounted read-only in
  an image); they import each other as top-level modules.
- ``collect_env.py`` with ``collect_parse.py`` and ``collect_children.py``: run by
  envgen.doctor.collect under the interpreter `envgen doctor` diagnoses; prints one JSON
  doctor snapshot.
- ``node_probe.py`` (a node's facts, a port's listen/connect test) and ``collective.py`` (a real
  rendezvous, checked all_reduce and its bandwidth): sent by envgen.preflight to every node of a
  job as program text on stdin.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["SCRIPTS", "path"]

_HERE = Path(__file__).resolve().parent

SCRIPTS: tuple[str, ...] = (
    "check-ops.py", "checks_colossalai.py", "checks_common.py", "checks_deepspeed.py",
    "checks_megatron_core.py", "collect_children.py", "collect_env.py", "collect_parse.py",
    "collective.py", "node_probe.py", "ops.py", "prune-conda.py", "sitecustomize.py",
    "smoke.py",
)


def path(name: str) -> Path:
    """The file ``name`` (one of SCRIPTS) in this folder."""
    if name not in SCRIPTS:
        raise KeyError(f"envgen/inside has no script {name!r}; it has: {', '.join(SCRIPTS)}")
    return _HERE / name
