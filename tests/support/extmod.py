"""Real CPython extension modules, compiled on the host, and wheels that carry them: stand-ins
for a framework's prebuilt ops that `envgen/inside/check-ops.py --import` can really load.

Each module is a few lines of C: ``PyInit_<name>`` returns an empty module, or raises
ImportError (an op whose init fails), and may be linked against a stub ``libcuda.so.1`` that is
absent at run time (an op that needs the NVIDIA driver, as DeepSpeed's async_io does). Needs a
C compiler and the running Python's headers; :func:`can_compile` says whether they are here.
"""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from pathlib import Path

from support.wheels import _metadata, _record_hash, _wheel_file, _zip, wheel_name

EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")  # ".cpython-311-x86_64-linux-gnu.so"

_SOURCE = """#define PY_SSIZE_T_CLEAN
#include <Python.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "%(name)s", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_%(name)s(void) {
%(body)s    return PyModule_Create(&def);
}
"""


def compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def can_compile() -> bool:
    include = Path(sysconfig.get_paths()["include"]) / "Python.h"
    return compiler() is not None and include.is_file()


def libcuda_stub(out_dir: Path) -> Path:
    """An empty library whose soname is the driver's (libcuda.so.1), to link against only."""
    out = Path(out_dir) / "libcuda.so"
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([compiler(), "-shared", "-fPIC", "-x", "c", "-", "-Wl,-soname,libcuda.so.1",
                    "-o", str(out)], input="void envgen_libcuda_stub(void) {}\n", text=True,
                   check=True, capture_output=True, timeout=120)
    return out


def extension(out_dir: Path, name: str, *, fail: str | None = None,
              needs_libcuda: bool = False) -> Path:
    """``out_dir/<name><EXT_SUFFIX>``: a module that imports, or raises ImportError(``fail``)
    from its init, or (``needs_libcuda``) has libcuda.so.1 as a DT_NEEDED library."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    body = ""
    if fail is not None:
        body = f'    PyErr_SetString(PyExc_ImportError, "{fail}");\n    return NULL;\n'
    src = out_dir / f"{name}.c"
    src.write_text(_SOURCE % {"name": name, "body": body})
    out = out_dir / f"{name}{EXT_SUFFIX}"
    cmd = [compiler(), "-shared", "-fPIC", "-O0", f"-I{sysconfig.get_paths()['include']}",
           str(src), "-o", str(out)]
    if needs_libcuda:
        stub = libcuda_stub(out_dir / "stub")
        cmd += ["-Wl,--no-as-needed", f"-L{stub.parent}", "-lcuda"]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
    src.unlink()
    return out


def binary_wheel(out_dir: Path, name: str, version: str, *, tag: str,
                 files: dict[str, bytes | str], requires: tuple[str, ...] = ()) -> Path:
    """A wheel like support.wheels.build_wheel's, whose members may be bytes (compiled
    modules); deterministic for the same bytes."""
    dist = wheel_name(name)
    info = f"{dist}-{version}.dist-info"
    members = {path: data if isinstance(data, bytes) else data.encode()
               for path, data in sorted(files.items())}
    members[f"{info}/METADATA"] = _metadata(name, version, requires, None).encode()
    members[f"{info}/WHEEL"] = _wheel_file(tag).encode()
    record = [f"{path},{_record_hash(data)},{len(data)}" for path, data in members.items()]
    members[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    out = Path(out_dir) / f"{dist}-{version}-{tag}.whl"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(_zip(members))
    return out
