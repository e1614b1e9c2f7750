"""Print one JSON doctor snapshot (schema 1) of the Python environment that runs this script.

Run by envgen.doctor.collect under the TARGET interpreter (``<python> collect_env.py
[--budget SECONDS]``), which has no envgen: standard library only, Python 3.7 syntax (3.8+
collects everything; 3.7 loses the installed-package facts). Output: one JSON object
on stdout (everything else the probes print goes to stderr). It never crashes: each probe is
wrapped, a probe that cannot decide leaves its field out (unknown), and null means "known to be
none" (as envgen/schemas/doctor-snapshot.schema.json says).

Imports that may crash or hang (torch, the frameworks, cached extension modules) run in child
processes of this script (``collect_env.py --child``), with a time limit; an import that fails
is recorded in ``import_errors`` (module -> "ExceptionType: message"); a module that is not
installed is not an error.

Its sibling modules: collect_parse.py (the pure parsers, unit-tested by
tests/doctor/test_collect.py) and collect_children.py (the child processes).
"""

import contextlib
import glob
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys

# the sibling modules (sys.path[0] when run as a script; also when loaded by path in tests)
if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from collect_children import Budget, child_main, run_tasks
from collect_parse import (
    _WORD,
    describe,
    ninja_cxx11_abi,
    ninja_module_file,
    one_line,
    parse_build_dir_name,
    parse_nvcc_version,
    parse_os_release,
    parse_pip_check,
    version_or_none,
)

# modules whose import is itself a fact (import_errors), tried only when installed
IMPORTS = ("torch", "deepspeed", "colossalai", "megatron.core", "apex", "flash_attn",
           "transformer_engine")
# framework distribution -> the module it installs
FRAMEWORKS = (("deepspeed", "deepspeed"), ("megatron-core", "megatron.core"),
              ("colossalai", "colossalai"))
ENV_NAMES = ("CUDA_HOME", "CUDA_PATH", "TORCH_CUDA_ARCH_LIST", "TORCH_EXTENSIONS_DIR",
             "DS_SKIP_CUDA_CHECK", "DS_ACCELERATOR", "LD_LIBRARY_PATH", "LD_PRELOAD", "CC", "CXX",
             "MAX_JOBS")
ENV_PREFIXES = ("DS_BUILD_", "NCCL_")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def run(cmd, timeout=30, env=None):
    """(exit code, stdout, stderr) of ``cmd``; None when it cannot be started or times out."""
    try:
        proc = subprocess.run(cmd, capture_output=True, stdin=subprocess.DEVNULL, text=True,
                              errors="replace", timeout=timeout, env=env)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    return proc.returncode, proc.stdout, proc.stderr


# ---------------------------------------------------------------- the system


def probe_system(out):
    out["python"] = platform.python_version()
    system = platform.system()
    machine = platform.machine().lower()
    if system == "Linux":
        try:
            with open("/proc/version") as f:
                wsl = "microsoft" in f.read().lower()
        except OSError:
            wsl = False
        if wsl:
            out["platform"] = "wsl2"
        elif machine in ("x86_64", "amd64"):
            out["platform"] = "linux-x86_64"
        elif machine in ("aarch64", "arm64"):
            out["platform"] = "linux-aarch64"
        # other machines (ppc64le, s390x): not a platform schema 1 names; left out
        try:
            with open("/etc/os-release") as f:
                name = parse_os_release(f.read())
        except OSError:
            name = None
        out["os"] = name or one_line(platform.platform())
        try:
            libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
        except (ValueError, OSError, AttributeError):
            libc = ""
        m = re.match(r"glibc\s+(\S+)", libc)
        out["glibc"] = m.group(1) if m else None  # None: not glibc (musl)
    elif system == "Darwin":
        if machine == "arm64":
            out["platform"] = "macos-arm64"
        release = platform.mac_ver()[0]
        out["os"] = "macOS " + release if release else one_line(platform.platform())
        out["glibc"] = None
    elif system == "Windows":
        out["platform"] = "windows"
        out["os"] = one_line("Windows " + platform.release())
        out["glibc"] = None
    else:
        out["os"] = one_line(platform.platform())


def find_cuda_home():
    """The toolkit torch.utils.cpp_extension would build with, found in the order of its
    ``_find_cuda_home`` (torch/utils/cpp_extension.py, 2.0 to 2.13): $CUDA_HOME, else
    $CUDA_PATH (the first non-empty one, taken as is), else dirname(dirname(which nvcc)),
    else /usr/local/cuda if it exists (on Windows the first
    C:/Program Files/NVIDIA GPU Computing Toolkit/CUDA/v*.*); None when none."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        return home
    nvcc = shutil.which("nvcc")
    if nvcc:
        return os.path.dirname(os.path.dirname(nvcc))
    if os.name == "nt":
        homes = glob.glob("C:/Program Files/NVIDIA GPU Computing Toolkit/CUDA/v*.*")
        return homes[0] if homes else None
    return "/usr/local/cuda" if os.path.exists("/usr/local/cuda") else None


def nvcc_version(nvcc):
    """The version of the nvcc at ``nvcc``; None when it is absent; "" when it does not say."""
    if not (os.path.isfile(nvcc) and os.access(nvcc, os.X_OK)):
        return None
    result = run([nvcc, "--version"], timeout=30)
    if result is None or result[0] != 0:
        return ""
    return parse_nvcc_version(result[1]) or ""


def probe_cuda(out):
    home = find_cuda_home()
    out["cuda_home"] = one_line(home) if home else None
    exe = "nvcc.exe" if os.name == "nt" else "nvcc"
    if home:
        version = nvcc_version(os.path.join(home, "bin", exe))
        if version != "":
            out["nvcc"] = version
    else:
        out["nvcc"] = None
    on_path = shutil.which("nvcc")
    if on_path:
        version = nvcc_version(on_path)
        if version != "":
            out["path_nvcc"] = version
        out["path_cuda_home"] = one_line(os.path.dirname(os.path.dirname(on_path)))
    else:
        out["path_nvcc"] = None
        out["path_cuda_home"] = None


def probe_compiler(out):
    """gcc: the GNU version of the host C++ compiler builds use ($CXX, else c++, else g++);
    None when there is none or it is not GCC (clang); left out when it cannot be run."""
    cxx = os.environ.get("CXX", "").strip()
    words = None
    if cxx:
        try:
            words = shlex.split(cxx)
        except ValueError:
            words = None
    if not words:
        for name in ("c++", "g++"):
            if shutil.which(name):
                words = [name]
                break
    if not words:
        out["gcc"] = None
    else:
        first = run([*words, "--version"], timeout=30)
        if first is not None and first[0] == 0:
            text = first[1]
            if "clang" in text.lower() or "Free Software Foundation" not in text:
                out["gcc"] = None
            else:
                for flag in ("-dumpfullversion", "-dumpversion"):
                    result = run([*words, flag], timeout=30)
                    version = version_or_none(result[1]) if result and result[0] == 0 else None
                    if version:
                        out["gcc"] = version
                        break
    majors = set()
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        for file in glob.glob(os.path.join(folder or ".", "gcc-[0-9]*")):
            m = re.match(r"^gcc-(\d+)(?:\.exe)?$", os.path.basename(file))
            if m and int(m.group(1)) > 0 and os.access(file, os.X_OK):
                majors.add(int(m.group(1)))
    out["gcc_available"] = sorted(majors)


def probe_libaio(out):
    if os.name == "nt":
        out["libaio"] = {"library": False, "headers": False}
        return
    import ctypes
    import ctypes.util

    library = False
    with contextlib.suppress(Exception):
        library = bool(ctypes.util.find_library("aio"))
    for name in ("libaio.so.1", "libaio.so.1t64", "libaio.so"):
        if library:
            break
        try:
            ctypes.CDLL(name)
            library = True
        except OSError:
            pass
    dirs = ["/usr/include", "/usr/local/include"]
    if os.environ.get("CONDA_PREFIX"):
        dirs.append(os.path.join(os.environ["CONDA_PREFIX"], "include"))
    for var in ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"):
        dirs += [d for d in os.environ.get(var, "").split(os.pathsep) if d]
    headers = any(os.path.isfile(os.path.join(d, "libaio.h")) for d in dirs)
    out["libaio"] = {"library": library, "headers": headers}


def probe_ninja(out):
    """ninja on PATH, run as torch's is_ninja_available does (``ninja --version``)."""
    if not shutil.which("ninja"):
        out["ninja"] = None
        return
    result = run(["ninja", "--version"], timeout=30)
    if result is not None and result[0] == 0:
        version = version_or_none(result[1].strip().splitlines()[0] if result[1].strip() else "")
        if version:
            out["ninja"] = version


def probe_nccl(out):
    """The libnccl the dynamic loader finds outside torch's wheel (real path, so the version
    shows): LD_PRELOAD, else LD_LIBRARY_PATH, else ``ldconfig -p``; None when none."""
    if not sys.platform.startswith("linux"):
        out["nccl_system"] = None
        return
    for entry in re.split(r"[:\s]+", os.environ.get("LD_PRELOAD", "")):
        if os.path.basename(entry).startswith("libnccl") and os.path.exists(entry):
            out["nccl_system"] = one_line(os.path.realpath(entry))
            return
    for folder in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if not folder:
            continue
        found = sorted(glob.glob(os.path.join(folder, "libnccl.so*")))
        if found:
            best = os.path.join(folder, "libnccl.so.2")
            out["nccl_system"] = one_line(os.path.realpath(best if best in found else found[0]))
            return
    ldconfig = shutil.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(p)), None)
    if not ldconfig:
        return  # unknown
    result = run([ldconfig, "-p"], timeout=30)
    if result is None or result[0] != 0:
        return
    entries = re.findall(r"^\s*(libnccl\.so\S*)\s.*=>\s*(\S+)\s*$", result[1], re.MULTILINE)
    entries.sort(key=lambda e: e[0] != "libnccl.so.2")
    out["nccl_system"] = one_line(os.path.realpath(entries[0][1])) if entries else None


def probe_env(out):
    out["env"] = {k: v for k, v in sorted(os.environ.items())
                  if k in ENV_NAMES or k.startswith(ENV_PREFIXES)}


def _canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def probe_packages(out):
    """packages (every installed distribution), frameworks (installed metadata; importable
    without metadata: null)."""
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        return
    packages = {}
    for dist in metadata.distributions():
        try:
            name = dist.metadata["Name"]
        except Exception:
            continue
        if not name or not _NAME.match(name):
            continue
        key = _canonical(name)
        if key not in packages:  # the first on sys.path is the one imports see
            packages[key] = version_or_none(dist.version)
    out["packages"] = dict(sorted(packages.items()))
    frameworks = {}
    for dist, module in FRAMEWORKS:
        if dist in packages:
            frameworks[dist] = packages[dist]
        elif installed(module):
            frameworks[dist] = None  # a source checkout: importable, no metadata
    out["frameworks"] = frameworks


def installed(module):
    """Whether ``module`` can be found (its parent packages are imported to look)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except Exception:
        return False


def probe_pip_check(out, budget):
    """conflicts: ``python -m pip check``; left out without pip or when it fails."""
    result = run([sys.executable, "-m", "pip", "check"], timeout=max(5, min(60, budget.left())),
                 env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    if result is None:
        return
    code, stdout, _stderr = result
    conflicts = parse_pip_check(stdout)
    if code == 0 or conflicts:
        out["conflicts"] = conflicts


# ---------------------------------------------------------------- torch and child processes


def torch_version_file():
    """(version, cuda) read from torch/version.py without importing torch; None if absent."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
    except Exception:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        try:
            with open(os.path.join(folder, "version.py")) as f:
                text = f.read()
        except OSError:
            continue
        version = re.search(r"^__version__\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
        cuda = re.search(r"^cuda\s*(?::[^=]*)?=\s*(?:['\"]([^'\"]+)['\"]|None)", text, re.M)
        return (version.group(1) if version else None,
                cuda.group(1) if cuda else "unknown")
    return None


def probe_imports(out, budget):
    """torch's facts and import_errors, from imports in a child process."""
    wanted = [m for m in IMPORTS if installed(m)]
    errors = {}
    out["import_errors"] = errors
    if "torch" not in wanted:
        out["torch"] = None  # not installed: the torch_* facts stay unknown
    results = run_tasks([["import", m] for m in wanted], budget)
    for index, module in enumerate(wanted):
        result = results.get(index)
        if result is None:
            continue
        if "error" in result:
            errors[module] = result["error"]
        elif module == "torch":
            for key, value in result.get("facts", {}).items():
                out[key] = value
    if "torch" in wanted and "torch" not in out:  # its import failed: read its version.py
        found = torch_version_file()
        if found and found[0]:
            out["torch"] = version_or_none(found[0])
            if found[1] != "unknown":
                out["torch_cuda"] = found[1]


def extensions_root():
    """(root, layout) torch's _get_build_directory uses: $TORCH_EXTENSIONS_DIR (<root>/<name>),
    else its user cache (<root>/py311_cu121/<name>): $XDG_CACHE_HOME or ~/.cache on Linux,
    ~/Library/Caches on macOS, %LOCALAPPDATA%\\torch_extensions\\torch_extensions\\Cache."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if root:
        return root, "flat"
    if sys.platform == "darwin":
        base = os.path.expanduser("~/Library/Caches")
    elif os.name == "nt":
        base = os.path.join(os.environ.get("LOCALAPPDATA", os.path.expanduser("~")),
                            "torch_extensions")
        return os.path.join(base, "torch_extensions", "Cache"), "tagged"
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "torch_extensions"), "tagged"


def probe_extensions(out, budget):
    """torch_extensions: each cached build, and whether its module loads into this torch
    (tried only for builds this interpreter's torch would use: same Python and CUDA tag)."""
    root, layout = extensions_root()
    if not os.path.isdir(root):
        out["torch_extensions"] = []
        return
    current_python = "{}.{}".format(*sys.version_info[:2])
    torch_cuda = out.get("torch_cuda", "unknown")
    entries = []
    if layout == "flat":
        candidates = [(os.path.join(root, n), None) for n in sorted(os.listdir(root))]
    else:
        candidates = []
        for tag in sorted(os.listdir(root)):
            parsed = parse_build_dir_name(tag)
            folder = os.path.join(root, tag)
            if parsed is None or not os.path.isdir(folder):
                continue
            candidates += [(os.path.join(folder, n), parsed) for n in sorted(os.listdir(folder))]
    tasks, which = [], []
    for folder, tags in candidates:
        if not os.path.isdir(folder):
            continue
        name = os.path.basename(folder)
        entry = {"path": one_line(folder), "torch": None, "cuda": tags[1] if tags else None,
                 "ops": [name] if _WORD.match(name) else [], "python": tags[0] if tags else None,
                 "cxx11_abi": None, "loads": None, "error": None}
        ninja = ""
        try:
            with open(os.path.join(folder, "build.ninja"), errors="replace") as f:
                ninja = f.read()
        except OSError:
            pass
        entry["cxx11_abi"] = ninja_cxx11_abi(ninja)
        # torch < 2.14's FileBaton waits while <folder>/lock exists; torch >= 2.14 leaves it
        entry["lock"] = os.path.exists(os.path.join(folder, "lock"))
        module = os.path.join(folder, ninja_module_file(ninja, name))
        usable = tags is None or (tags[0] == current_python and tags[1] == torch_cuda)
        if usable and out.get("torch") and os.path.isfile(module):
            tasks.append(["load", name, module])
            which.append(entry)
        entries.append(entry)
    for task in tasks:  # the other usable builds, which an op may need loaded first
        task.append([t[2] for t in tasks if t is not task])
    if tasks:
        results = run_tasks(tasks, budget, per_task=30)
        for index, entry in enumerate(which):
            result = results.get(index)
            if result is None or result.get("no_torch"):
                continue
            entry["loads"] = "error" not in result
            entry["error"] = result.get("error")
    out["torch_extensions"] = entries


PROBES = (probe_system, probe_cuda, probe_compiler, probe_libaio, probe_ninja, probe_nccl,
          probe_env, probe_packages)


def main(argv):
    if len(argv) > 2 and argv[1] == "--child":
        child_main(json.loads(argv[2]))
        return 0
    budget = Budget(float(argv[argv.index("--budget") + 1]) if "--budget" in argv else 100.0)
    real = os.fdopen(os.dup(1), "w")
    with contextlib.suppress(OSError):
        os.dup2(2, 1)
    sys.stdout = sys.stderr
    out = {"schema": 1}
    failures = {}
    for probe in PROBES:
        try:
            probe(out)
        except Exception as exc:
            failures[probe.__name__] = describe(exc)
    for probe in (probe_imports, probe_pip_check, probe_extensions):
        try:
            probe(out, budget)
        except Exception as exc:
            failures[probe.__name__] = describe(exc)
    if failures:  # a bug in a probe, not in the environment: say so on stderr
        sys.stderr.write(f"collect_env: probes failed: {json.dumps(failures)}\n")
    # the caller's marker (a fresh nonce) proves the line came from this script
    marker = argv[argv.index("--marker") + 1] if "--marker" in argv else None
    real.write((marker + " " if marker else "") + json.dumps(out) + "\n")
    real.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
