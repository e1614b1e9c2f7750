"""The pure parts of collect_env.py: text helpers and the parsers of what the probes read
(os-release, nvcc --version, pip check, torch extension folders and their build.ninja, torch's
NCCL version). Standard library only, Python 3.7 syntax, like collect_env.py, which imports it
as a sibling module; unit-tested by tests/doctor/test_collect.py.
"""

import re
import shlex

_WORD = re.compile(r"^[^\s\x00-\x1f\x7f]+$")


def one_line(text, limit=300):
    """``text`` as one line of printable text, at most ``limit`` characters ("?" if empty)."""
    line = " ".join(str(text).split())
    line = "".join(c if c.isprintable() else "?" for c in line)
    if len(line) > limit:
        line = line[:limit - 1] + "…"
    return line or "?"


def describe(exc):
    """``ExceptionType: message`` on one line (its first line when the message is long)."""
    message = str(exc).strip().splitlines()
    return one_line(type(exc).__name__ + (": " + message[0] if message else ""))


def version_or_none(text):
    """``text`` if it is a version without spaces, else None."""
    text = str(text).strip() if text is not None else ""
    return text if text and _WORD.match(text) else None


def parse_os_release(text):
    """PRETTY_NAME of an /etc/os-release text ("Debian GNU/Linux 12 (bookworm)"), else
    "NAME VERSION_ID", else None."""
    values = {}
    for line in text.splitlines():
        if "=" not in line or line.lstrip().startswith("#"):
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        try:
            value = " ".join(shlex.split(value))
        except ValueError:
            value = value.strip("\"'")
        values[key.strip()] = value
    if values.get("PRETTY_NAME"):
        return one_line(values["PRETTY_NAME"])
    name = " ".join(v for v in (values.get("NAME"), values.get("VERSION_ID")) if v)
    return one_line(name) if name else None


def parse_nvcc_version(text):
    """The version ``nvcc --version`` prints after "V" ("13.0.88"), else its release
    ("12.1"), else None."""
    m = re.search(r"release\s+[0-9.]+,\s*V([0-9][0-9.]*[0-9])", text)
    if m:
        return m.group(1)
    m = re.search(r"release\s+([0-9]+\.[0-9]+)", text)
    return m.group(1) if m else None


_PIP_CONFLICT = re.compile(r"^(\S+) (\S+) has requirement (.+), but you have (\S+) (\S+?)\.?$")
_PIP_MISSING = re.compile(r"^(\S+) (\S+) requires (.+), which is not installed\.?$")


def parse_pip_check(text):
    """The conflicts in ``pip check`` output: a list of {package, version, requires, have}
    (``have`` None: not installed). Lines of other kinds ("No broken requirements found.",
    "... is not supported on this platform") are skipped."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        m = _PIP_CONFLICT.match(line)
        if m:
            found.append({"package": m.group(1), "version": version_or_none(m.group(2)),
                          "requires": one_line(m.group(3)), "have": version_or_none(m.group(5))})
            continue
        m = _PIP_MISSING.match(line)
        if m:
            found.append({"package": m.group(1), "version": version_or_none(m.group(2)),
                          "requires": one_line(m.group(3)), "have": None})
    return found


def parse_build_dir_name(name):
    """(python, cuda) of a torch extensions directory name: "py311_cu121" -> ("3.11",
    "12.1"), "py310_cpu" -> ("3.10", None); None when ``name`` is not one (a ROCm one,
    "py311_rocm62", gives cuda None as well)."""
    m = re.match(r"^py(\d)(\d+)[a-z]*_(cpu|cu(\d+)|rocm\d+)$", name)
    if not m:
        return None
    python = m.group(1) + "." + m.group(2)
    cuda = None
    if m.group(4):
        digits = m.group(4)
        cuda = digits[:-1] + "." + digits[-1] if len(digits) > 1 else digits
    return python, cuda


def ninja_cxx11_abi(text):
    """The ``-D_GLIBCXX_USE_CXX11_ABI=0|1`` a build.ninja passes (True/False); None when it
    passes none (torch >= 2.7 no longer does: it only builds with the C++11 ABI)."""
    m = re.search(r"-D_GLIBCXX_USE_CXX11_ABI=([01])\b", text)
    return None if not m else m.group(1) == "1"


def ninja_module_file(text, name):
    """The file a torch extension's build.ninja links (``build cpu_adam.so: link ...``)."""
    m = re.search(r"^build\s+(\S+?\.(?:so|pyd|dylib))\s*:\s*link\b", text, re.MULTILINE)
    return m.group(1) if m else name + ".so"


def nccl_text(version):
    """torch.cuda.nccl.version() as text: (2, 27, 3) -> "2.27.3"; the int older torch gives
    (NCCL_VERSION_CODE: 21805 -> "2.18.5", 2708 -> "2.7.8") too."""
    if isinstance(version, tuple):
        return ".".join(str(v) for v in version[:3])
    version = int(version)
    if version >= 1 << 32:
        return f"{version >> 32}.{(version >> 16) & 65535}.{version & 65535}"
    if version >= 10000:
        return f"{version // 10000}.{version // 100 % 100}.{version % 100}"
    return f"{version // 1000}.{version // 100 % 10}.{version % 100}"
