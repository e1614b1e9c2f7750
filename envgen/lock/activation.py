"""The locked toolchain, seen by everything in an installed environment without exports.

An environment `envgen install` made is only what its lock promises if the tools inside it find
the lock's toolchain: torch's extension builder takes nvcc from ``CUDA_HOME`` (else ``PATH``,
else /usr/local/cuda) and the host compiler from ``CC``/``CXX``, so a machine's own CUDA
toolkit or a ``CUDA_HOME`` exported by a cluster's profile would otherwise win over the nvcc
the lock matched to torch's CUDA. The values:

- ``PATH``: the env's own ``bin`` first (where the lock put ninja, which torch's extension
  builder runs by name), as activation does;
- ``CUDA_HOME`` (and its ``bin`` first on ``PATH``): the lock's nvcc — the venv's NVIDIA nvcc
  wheel, the conda prefix, the OS toolkit of the os-package flavor; not set for a lock made
  with ``--nvcc`` (the machine's toolkit, which the user named) or when no nvcc is there;
- ``CC``/``CXX``: the gcc the lock chose (the conda compilers in the prefix; the OS's
  ``gcc-N``/``g++-N`` of the venv flavors when this machine has them);
- ``TORCH_EXTENSIONS_DIR``: a folder of this environment, so two environments never load each
  other's JIT-built ops;
- ``TORCH_CUDA_ARCH_LIST``: the GPU architectures the lock was made for (``--gpu``/``--gpu-arch``).

Each is set three ways, each the convention of its ecosystem: a ``.pth`` file in site-packages
that sets them when the environment's Python starts (launchers and IDEs run ``env/bin/python``
without activating anything), the venv's ``bin/activate`` (saved and restored by
``deactivate``), and conda's ``etc/conda/activate.d`` / ``deactivate.d`` scripts. The
environment's values win over inherited ones; ``ENVGEN_ENV=off`` turns the ``.pth`` off.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envgen.proc import run
from envgen.validate import shown

VARIABLES = ("CUDA_HOME", "CC", "CXX", "TORCH_EXTENSIONS_DIR", "TORCH_CUDA_ARCH_LIST")
PTH = "_envgen_env.pth"
MODULE = "_envgen_env.py"
RECORD = Path("etc") / "envgen" / "env.json"
ACTIVATE_MARK = "# envgen: the locked toolchain"


@dataclass(frozen=True)
class Activation:
    """What an installed environment sets (``values``, ``path`` prepended to PATH) and what
    it could not (``notes``: one line each, with the fix)."""

    values: dict[str, str]
    path: tuple[str, ...]
    notes: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"values": dict(self.values), "path": list(self.path), "notes": list(self.notes)}


def _gcc_major(compiler: str) -> int | None:
    try:
        out = run([compiler, "-dumpversion"], capture_output=True, text=True,
                  timeout=30).stdout.strip()
        return int(out.split(".")[0])
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def _os_compilers(gcc: int, which: Callable[[str], str | None]) -> tuple[str, str] | None:
    """This machine's gcc-N/g++-N, or its plain gcc/g++ when that is version N."""
    pair = which(f"gcc-{gcc}"), which(f"g++-{gcc}")
    if all(pair):
        return pair[0], pair[1]  # type: ignore[return-value]
    plain = which("gcc"), which("g++")
    if all(plain) and _gcc_major(plain[0]) == gcc:  # type: ignore[arg-type]
        return plain[0], plain[1]  # type: ignore[return-value]
    return None


def _conda_compilers(prefix: Path) -> tuple[str, str] | None:
    """conda-forge's compilers in the prefix: the triplet names (gcc_impl), else the plain
    gcc/g++ its ``gcc``/``gxx`` packages link to them."""
    cc = sorted(prefix.glob("bin/*-conda-linux-gnu-gcc")) or sorted(prefix.glob("bin/gcc"))
    cxx = sorted(prefix.glob("bin/*-conda-linux-gnu-g++")) or sorted(prefix.glob("bin/g++"))
    return (str(cc[0]), str(cxx[0])) if cc and cxx else None


def plan(manifest, prefix: Path, site_packages: Path, *,
         which: Callable[[str], str | None] = shutil.which) -> Activation:
    """The values for ``manifest``'s environment installed at ``prefix`` (its site-packages:
    ``site_packages``)."""
    values: dict[str, str] = {}
    path: list[str] = []
    notes: list[str] = []
    combo, tc = manifest.combination, manifest.toolchain
    home = tc.env.get("CUDA_HOME")
    if home and combo.get("nvcc_from") != "system":
        home = home.replace("$SITE_PACKAGES", str(site_packages)).replace("$CONDA_PREFIX",
                                                                         str(prefix))
        if (Path(home) / "bin" / "nvcc").exists():
            values["CUDA_HOME"] = home
            if Path(home) / "bin" != prefix / "bin":  # the env's own bin is on PATH already
                path.append(str(Path(home) / "bin"))
        else:
            notes.append(f"CUDA_HOME not set: the lock's nvcc is not at {home}/bin/nvcc"
                         + (f" (install the lock's OS packages: {' '.join(tc.os_packages)})"
                            if tc.os_packages else ""))
    gcc = combo.get("gcc") or tc.gcc
    pair = _conda_compilers(prefix) if manifest.flavor == "conda" else (
        _os_compilers(int(gcc), which) if gcc else None)
    if pair:
        values["CC"], values["CXX"] = pair
    elif gcc and manifest.flavor != "conda":
        notes.append(f"CC/CXX not set: this machine has no gcc {gcc} (the lock's OS packages: "
                     f"{' '.join(tc.os_packages) or f'gcc-{gcc} g++-{gcc}'})")
    values["TORCH_EXTENSIONS_DIR"] = str(prefix / "var" / "torch_extensions")
    archs = tc.env.get("TORCH_CUDA_ARCH_LIST") or (
        manifest.image.cuda_arch_list if manifest.image else None)
    if archs:
        values["TORCH_CUDA_ARCH_LIST"] = archs
    for name, value in list(values.items()):  # a path found on this machine, shown later
        if not value.isprintable():
            del values[name]
            notes.append(f"{name} not set: {shown(value)} has a control character")
    return Activation(values=values, path=tuple(p for p in path if p.isprintable()),
                      notes=tuple(notes))


def _module(act: Activation, prefix: Path) -> str:
    """The module the .pth imports: plain literals, the standard library's os only. PATH gets
    the env's own bin first, as activation would: the tools the lock installed there (ninja,
    which torch's extension builder runs by name) are found by what the env's Python starts."""
    return (
        '"""Written by envgen install: this environment\'s toolchain for every process its\n'
        'Python starts (etc/envgen/env.json says what and why). ENVGEN_ENV=off turns it off."""\n'
        "import os\n\n"
        f"VALUES = {act.values!r}\n"
        f"PATH = {[str(prefix / 'bin'), *act.path]!r}\n\n"
        'if os.environ.get("ENVGEN_ENV") != "off":\n'
        "    os.environ.update(VALUES)\n"
        "    if PATH:\n"
        '        rest = [p for p in os.environ.get("PATH", "").split(os.pathsep)\n'
        "                if p and p not in PATH]\n"
        "        os.environ[\"PATH\"] = os.pathsep.join(PATH + rest)\n")


def _sh_activate(act: Activation, saved: str) -> str:
    """POSIX sh lines that save each variable in ``<saved><NAME>`` and export the value."""
    lines = []
    for name, value in act.values.items():
        old = saved + name
        lines += [f'if [ -n "${{{name}+_}}" ]; then {old}="${name}"; export {old}; fi',
                  f"{name}={shlex.quote(value)}; export {name}"]
    if act.path:
        lines.append(f"PATH={shlex.quote(':'.join(act.path))}:\"$PATH\"; export PATH")
    return "\n".join(lines) + "\n"


def _sh_restore(act: Activation, saved: str) -> str:
    lines = []
    for name in act.values:
        lines.append(f'if [ -n "${{{saved}{name}+_}}" ]; then {name}="${saved}{name}"; '
                     f"export {name}; unset {saved}{name}; else unset {name}; fi")
    return "\n".join(lines) + "\n"


def _patch_venv_activate(activate: Path, act: Activation) -> bool:
    """Append the exports to a venv's bin/activate and make its ``deactivate`` undo them
    (it restores PATH itself). False when the script is not the shape expected."""
    text = activate.read_text(encoding="utf-8")
    hook = "deactivate () {\n"
    if ACTIVATE_MARK in text or hook not in text:
        return False
    restore = ("_envgen_deactivate () {\n"
               + "".join(f"    {line}\n" for line in _sh_restore(act, "_ENVGEN_OLD_").splitlines())
               + "}\n")
    text = text.replace(hook, hook + "    _envgen_deactivate 2>/dev/null || true\n", 1)
    text += (f"\n{ACTIVATE_MARK} (envgen install; `deactivate` restores the old values)\n"
             + restore + _sh_activate(act, "_ENVGEN_OLD_"))
    activate.write_text(text, encoding="utf-8")
    return True


def write(act: Activation, prefix: Path, site_packages: Path, env_kind: str) -> list[Path]:
    """Write the .pth and its module, the record, and the activation hooks of ``env_kind``
    ("venv" or "conda"); returns the files written or changed."""
    written = []
    (site_packages / MODULE).write_text(_module(act, prefix), encoding="utf-8")
    (site_packages / PTH).write_text("import _envgen_env\n", encoding="utf-8")
    written += [site_packages / MODULE, site_packages / PTH]
    record = prefix / RECORD
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(act.to_dict(), indent=2) + "\n", encoding="utf-8")
    written.append(record)
    if env_kind == "venv":
        activate = prefix / "bin" / "activate"
        if activate.exists() and _patch_venv_activate(activate, act):
            written.append(activate)
    else:
        for kind, body in (("activate", _sh_activate(act, "_ENVGEN_CONDA_OLD_")),
                           ("deactivate", _sh_restore(act, "_ENVGEN_CONDA_OLD_"))):
            script = prefix / "etc" / "conda" / f"{kind}.d" / "envgen-env.sh"
            script.parent.mkdir(parents=True, exist_ok=True)
            script.write_text(f"{ACTIVATE_MARK} (envgen install)\n{body}", encoding="utf-8")
            written.append(script)
    return written
