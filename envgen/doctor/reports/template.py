"""The "Environment" / "System info" answers of the frameworks' GitHub issue templates.

DeepSpeed's bug template ("- OS: [e.g. Ubuntu 18.04]", "- GPU count and types", "- Python
version"), PyTorch's ("- PyTorch Version (e.g., 1.0):", "- CUDA/cuDNN version:", "- GPU models
and configuration:"), Megatron-LM's ("- Megatron-LM commit ID", "- PyTorch version", "- CUDA
version", "- NCCL version") and Colossal-AI's "### Environment", as people fill them in,
and the "key=value" lines some write instead ("torch=1.11.0+cu113", "gcc=7.5").

Input: the cleaned lines (bullets and bold already gone) and the line numbers other parsers
took. Output: the facts stated. A bare "CUDA version" does not say which CUDA (the toolkit,
torch's build or the driver's): explain only. A GPU line counts only with its number of GPUs
("8x A100 80GB"). The template's own examples ("[e.g. Ubuntu 18.04]") state nothing.
"""

from __future__ import annotations

import re

from envgen.doctor.reports._lines import Extracted, Line, fact, placeholder_free, version

FORMAT = "issue_template"
_FIELD = re.compile(r"^(OS|Operating system|Platform|PyTorch(?: Version| version)?|Torch(?: "
                    r"version|\.__version__)?|Python(?: version| Version)?|"
                    r"CUDA(?:/cuDNN)?(?: version| Version)?|"
                    r"DeepSpeed(?: version| Version)?|Colossal-?AI(?: version| Version)?|"
                    r"Megatron-LM commit(?: ID| id)?|Megatron-Core(?: version)?|megatron-core(?: "
                    r"version)?|(?:Nvidia |NVIDIA )?[Dd]river(?: version| Version)?|"
                    r"GCC(?:/Compiler)?(?: version)?|gcc(?: version)?|GPU count and types|"
                    r"GPU models and configuration|GPUs?|NCCL(?: version)?)"
                    r"\s*(?:\([^)]*\))?\s*[:=]\s*(.+)$", re.I)
_COUNTED = re.compile(r"^(?:(\d+)\s*[x×]\s*(.+)|(.+?)\s*[x×]\s*(\d+))$", re.I)
_WINDOWS = re.compile(r"\bWindows\b", re.I)
# `transformers-cli env` / `accelerate env`: "PyTorch version (GPU?): 2.0.1+cu118 (True)", the
# second value torch.cuda.is_available(); "Platform: Linux-5.15.0-76-generic-x86_64-with-
# glibc2.35" (Python's platform.platform(): the machine and the C library it runs on)
_GPU_AVAILABLE = re.compile(r"\((True|False)\)\s*$", re.I)
_PLATFORM = re.compile(r"^(Linux|macOS)-\S*?-(x86_64|aarch64|arm64)(?:\S*?-with-glibc(\d+\.\d+))?",
                       re.I)
_WSL2 = re.compile(r"\bWSL ?2\b", re.I)


def parse(lines: list[Line], claimed: set[int]) -> list[Extracted]:
    out: list[Extracted] = []
    for line in lines:
        m = _FIELD.match(line.text)
        if line.number in claimed or not m:
            continue
        value = placeholder_free(m.group(2))
        if not value:
            continue
        found = _field(line, m.group(1).lower(), value)
        if found:
            claimed.add(line.number)
            out.extend(found)
    return out


def _field(line: Line, label: str, value: str) -> list[Extracted]:
    first = version(value.split()[0]) if value.split() else None
    if label in ("os", "operating system", "platform"):
        out = [fact(line, "os", value, FORMAT)] if label != "platform" else []
        if _WSL2.search(value):
            out.append(fact(line, "platform", "wsl2", FORMAT))
        elif _WINDOWS.search(value):
            out.append(fact(line, "platform", "windows", FORMAT))
        elif label == "platform":
            out.extend(_python_platform(line, value))
        return out
    if label.startswith(("pytorch", "torch")) and first and not value.startswith("["):
        out = [fact(line, "torch", first, FORMAT)]
        local = re.search(r"\+(cu(\d+)|cpu)$", first)
        if local:
            cuda = local.group(2)
            out.append(fact(line, "torch_cuda", f"{cuda[:-1]}.{cuda[-1]}" if cuda else None,
                            FORMAT, note=f"the local label +{local.group(1)}"))
        gpu = _GPU_AVAILABLE.search(value)
        if gpu and gpu.group(1).lower() == "false":  # transformers' / accelerate's env
            out.append(fact(line, "errors.cuda_unavailable", line.source[:300], FORMAT,
                            note="\"(GPU?) … (False)\": torch.cuda.is_available() is False"))
        return out
    if label.startswith("python") and first:
        return [fact(line, "python", first, FORMAT)]
    if label.startswith("deepspeed") and first:
        return [fact(line, "frameworks.deepspeed", first, FORMAT)]
    if label.startswith("colossal") and first:
        return [fact(line, "frameworks.colossalai", first, FORMAT)]
    if label.startswith("megatron-core") and first:
        return [fact(line, "frameworks.megatron-core", first, FORMAT)]
    if label.startswith("megatron-lm commit") and re.match(r"^[0-9a-f]{7,40}\b", value):
        return [fact(line, "frameworks.megatron-core", None, FORMAT,
                     note=f"a Megatron-LM source checkout at {value.split()[0]}: version "
                     "unknown")]
    if "driver" in label and first:
        return [fact(line, "driver", first, FORMAT)]
    if label.startswith("gcc"):
        last = re.search(r"(\d+\.\d+(?:\.\d+)?)\s*$", value)
        if first or last:
            return [fact(line, "gcc", first or last.group(1), FORMAT)]
    if label.startswith("cuda"):
        return [fact(line, "cuda", value, FORMAT, kept=False, note="explain only: a bare "
                     "\"CUDA version\" may be the toolkit's, torch's build or the driver's")]
    if label.startswith("nccl") and first:
        return [fact(line, "nccl", first, FORMAT, kept=False, note="explain only: the NCCL "
                     "torch bundles or the system's, not said")]
    if label.startswith("gpu"):
        return _gpus(line, value)
    return []


def _gpus(line: Line, value: str) -> list[Extracted]:
    counted = _COUNTED.match(value)
    if not counted:
        return [fact(line, "gpu_models", value, FORMAT, kept=False,
                     note="explain only: no number of GPUs stated")]
    count = int(counted.group(1) or counted.group(4))
    name = (counted.group(2) or counted.group(3)).strip()
    if not 0 < count <= 64 or not name:
        return []
    gpus = tuple({"name": name, "compute_capability": None} for _ in range(count))
    return [fact(line, "gpus", gpus, FORMAT)]


def _python_platform(line: Line, value: str) -> list[Extracted]:
    """Python's platform.platform() string: the platform and, on Linux, glibc."""
    m = _PLATFORM.match(value)
    if m is None:
        return []
    system, arch = m.group(1).lower(), m.group(2).lower()
    if system == "macos":
        return [fact(line, "platform", "macos-arm64", FORMAT)] if arch == "arm64" else []
    out = [fact(line, "platform", f"linux-{'aarch64' if arch == 'arm64' else arch}", FORMAT)]
    if m.group(3):
        out.append(fact(line, "glibc", m.group(3), FORMAT, note="platform.platform()'s "
                        "'-with-glibc' part"))
    return out
