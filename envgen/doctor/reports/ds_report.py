"""DeepSpeed's ``ds_report`` output.

Input: the cleaned lines and the line numbers other parsers took. Output: the facts stated.
"torch version", "torch cuda version", "nvcc version" (the nvcc of torch's CUDA_HOME, as
major.minor: env_report runs ``$CUDA_HOME/bin/nvcc -V``) and "deepspeed info" (its version).
The op table ("async_io ..... [NO] ....... [OKAY]") goes to explain only: installed means
pre-built into the wheel, compatible means the op could be JIT-built; neither says which ops
the user builds. async_io's test (op_builder/async_io.py) compiles and links a program that
calls io_submit with ``-laio``, without including libaio.h; the warning "async_io requires the
dev libaio .so object and headers but these were not found" says only that this failed (it does
on machines with libaio-dev installed, deepspeedai/DeepSpeed#6972): explain only. What follows
it, "async_io: please install the libaio-dev package with apt" (``dpkg -l libaio-dev``, or
rpm/pacman, found no such package), and older releases' "async_io requires the libraries:
['libaio-dev'] but are missing" state that the package holding libaio.h is not installed:
libaio.headers false, the runtime library unknown. async_io compatible ([OKAY]) states that
-laio links (libaio.so and so libaio.so.1 are there): libaio.library true, headers unknown.
"""

from __future__ import annotations

import re

from envgen.doctor.reports._lines import Extracted, Line, fact, version

FORMAT = "ds_report"
_GENERAL = re.compile(r"^(torch install path|torch version|deepspeed install path|deepspeed info|"
                      r"torch cuda version|torch hip version|nvcc version|deepspeed wheel "
                      r"compiled w\.|shared memory \(/dev/shm\) size)\s*\.{2,}\s*(.*)$")
_OP = re.compile(r"^([a-z][a-z0-9_]*)\s*\.{2,}\s*\[(YES|NO|OKAY|FAIL)\]\s*(?:\.+\s*\[(OKAY|NO)\])?")
_AIO_TEST = re.compile(r"\[WARNING\]\s+async_io requires the dev libaio \.so object and headers "
                       r"but these were not found")
_AIO_PACKAGE = re.compile(r"\[WARNING\]\s+async_io(?:: please install the (libaio-dev|libaio-devel|"
                          r"libaio) package with \w+| requires the libraries: \['(libaio-dev)'\] "
                          r"but are missing)")


def parse(lines: list[Line], claimed: set[int]) -> list[Extracted]:
    out: list[Extracted] = []
    for line in lines:
        if line.number in claimed:
            continue
        general = _GENERAL.match(line.text)
        op = _OP.match(line.text)
        if general:
            claimed.add(line.number)
            out.extend(_general(line, general.group(1), general.group(2).strip()))
        elif op:
            claimed.add(line.number)
            out.extend(_op(line, op))
        elif _AIO_TEST.search(line.text):
            claimed.add(line.number)
            out.append(fact(line, "ds_report.async_io", "-laio test failed", FORMAT, kept=False,
                            note="explain only: DeepSpeed's link test with -laio failed; it does "
                            "not say whether libaio.h or libaio.so is missing"))
        elif found := _AIO_PACKAGE.search(line.text):
            claimed.add(line.number)
            package = next(g for g in found.groups() if g)
            out.append(fact(line, "libaio.headers", False, FORMAT,
                            note=f"the package manager has no {package}, which holds libaio.h"))
    if out and not any(e.fact == "frameworks.deepspeed" for e in out):
        first = next(line for line in lines if line.number == min(e.line for e in out))
        out.append(fact(first, "frameworks.deepspeed", None, FORMAT,
                        note="ds_report is DeepSpeed's own report: DeepSpeed is installed; "
                        "the text does not say which version"))
    return out


def _general(line: Line, label: str, value: str) -> list[Extracted]:
    if label == "torch version" and version(value):
        return [fact(line, "torch", version(value), FORMAT)]
    if label == "torch cuda version":
        if value == "None":
            return [fact(line, "torch_cuda", None, FORMAT, note="torch.version.cuda is None")]
        if version(value):
            return [fact(line, "torch_cuda", version(value), FORMAT)]
    if label == "nvcc version":
        if "cannot find CUDA_HOME" in value:
            note = "torch.utils.cpp_extension.CUDA_HOME is None"
            return [fact(line, "cuda_home", None, FORMAT, note=note),
                    fact(line, "nvcc", None, FORMAT, note=note)]
        if "nvcc missing" in value:
            return [fact(line, "nvcc", None, FORMAT, note="CUDA_HOME has no bin/nvcc")]
        if version(value):
            return [fact(line, "nvcc", version(value), FORMAT,
                         note="the nvcc of torch's CUDA_HOME")]
    if label == "deepspeed info":
        found = version(value.split(",")[0])
        if found:
            return [fact(line, "frameworks.deepspeed", found, FORMAT),
                    fact(line, "packages.deepspeed", found, FORMAT)]
    if label in ("torch install path", "deepspeed install path", "deepspeed wheel compiled w.",
                 "shared memory (/dev/shm) size", "torch hip version") and value:
        return [fact(line, label, value, FORMAT, kept=False, note="explain only")]
    return []


def _op(line: Line, op: re.Match[str]) -> list[Extracted]:
    name, installed, compatible = op.group(1), op.group(2), op.group(3)
    if compatible is None:  # "ninja .................. [OKAY]": the ninja Python module
        return [fact(line, f"ds_report.{name}", installed, FORMAT, kept=False,
                     note="explain only: ds_report checks `import ninja`, not the binary")]
    out = [fact(line, f"ds_report.{name}", f"installed {installed}, compatible {compatible}",
                FORMAT, kept=False, note="explain only: the op table does not say which ops "
                "the user builds")]
    if name == "async_io" and compatible == "OKAY":
        out.append(fact(line, "libaio.library", True, FORMAT,
                        note="async_io's test program links with -laio"))
    return out
