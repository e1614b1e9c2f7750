"""Compile (if not prebuilt), load and run each of the framework's ops once on a tiny input,
checked against a reference. Run inside the env or image under test:

    python ops.py --framework deepspeed --out result.json [--ops fused_adam,cpu_adam]

Standard library, torch and the framework only (this folder is mounted into images; no
envgen needed). The checks live in checks_<framework>.py:
- DeepSpeed: FusedAdam and CPU Adam steps vs torch.optim.AdamW; AIO write + read back
  byte-equal; the transformer inference kernel's layer norm vs torch's.
- Colossal-AI: CPU Adam and FusedAdam vs AdamW; fused layer norm, masked and causal softmax,
  the inference kernels (silu_and_mul, rms_layernorm) and the MoE cumsum vs torch.
- Megatron-Core: the dataset index builder (helpers_cpp) vs a NumPy reference.
An op that needs a GPU is skipped without one. Writes one JSON document; exit 0 all passed
or skipped, 1 a failure, 2 usage.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

from checks_common import Skip, frameworks, load_checks

SCHEMA = 1


def _error(exc: BaseException) -> str:
    last = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{type(exc).__name__}: {exc} ({Path(last.filename).name}:{last.lineno})"[:2000]


def run_op(checks, name: str, torch, import_error: str | None = None) -> dict:
    """One op's entry of the result: pass / skip / fail with what it was compared with. An
    op of a framework that does not import fails (it would otherwise skip without a GPU)."""
    fn, reference = checks.OPS[name]
    t0 = time.monotonic()
    if import_error:
        return {"name": name, "prebuilt": None, "status": "fail", "check": reference,
                "message": import_error, "seconds": 0.0, "build_seconds": None}
    prebuilt = checks.prebuilt(name)
    entry = {"name": name, "prebuilt": prebuilt}
    try:
        detail = fn(torch)
        entry.update(status="pass", check=f"{reference}: {detail}" if detail else reference,
                     message="")
    except Skip as exc:
        entry.update(status="skip", check=reference, message=str(exc))
    except Exception as exc:
        entry.update(status="fail", check=reference, message=_error(exc))
    entry["seconds"] = round(time.monotonic() - t0, 3)
    # a JIT compile is most of the time when the op was not prebuilt (and not skipped)
    built_now = prebuilt is False and entry["status"] != "skip"
    entry["build_seconds"] = entry["seconds"] if built_now else None
    return entry


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--framework", required=True, choices=frameworks())
    p.add_argument("--ops", help="comma-separated subset (default: all)")
    p.add_argument("--out", type=Path, help="write the JSON result here (default: stdout)")
    args = p.parse_args(argv)
    checks = load_checks(args.framework)
    names = args.ops.split(",") if args.ops else list(checks.OPS)
    unknown = [n for n in names if n not in checks.OPS]
    if unknown:
        print(f"unknown {args.framework} op(s) {unknown}; known: {sorted(checks.OPS)}",
              file=sys.stderr)
        return 2
    import torch

    # one line per op as it ends: on stdout when the document goes to --out (envgen streams
    # them as progress), else on stderr
    report = sys.stdout if args.out else sys.stderr
    version = import_error = None
    try:
        version = checks.version()
    except Exception as exc:
        import_error = f"{checks.MODULE} does not import: {_error(exc)}"
    results = []
    for name in names:
        entry = run_op(checks, name, torch, import_error)
        results.append(entry)
        built = f" (built in {entry['build_seconds']:.0f} s)" if entry["build_seconds"] else ""
        print(f"{name:24} {entry['status']:5} {entry['seconds']:7.1f} s{built}  "
              f"{entry['message'] or entry['check']}", file=report, flush=True)
    doc = {"schema": SCHEMA, "framework": args.framework, "torch": torch.__version__,
           "torch_cuda": torch.version.cuda, "ops": results}
    if version:
        doc["framework_version"] = version
    text = json.dumps(doc, indent=1) + "\n"
    if args.out:
        tmp = args.out.with_name(f".{args.out.name}.tmp")
        tmp.write_text(text)
        tmp.replace(args.out)
    else:
        sys.stdout.write(text)
    return 1 if any(r["status"] == "fail" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
