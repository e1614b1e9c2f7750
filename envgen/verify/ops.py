"""Compile (if not prebuilt), load and run each of the framework's ops once on a tiny input,
checked against a reference. Run inside the env or image under test:

    python ops.py --framework deepspeed --out result.json [--ops fused_adam,cpu_adam]

Standard library, torch and the framework only (copied into images; no envgen needed).
DeepSpeed: FusedAdam and CPU Adam steps vs torch.optim.AdamW; AIO write + read back
byte-equal; the transformer inference kernel's layer norm vs torch's. An op that needs a GPU
is skipped without one. Writes one JSON document; exit 0 all passed or skipped, 1 a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

SCHEMA = 1


class Skip(Exception):
    pass


def _adam_reference(torch, params, grads, steps, lr=1e-2, wd=0.01):
    ref = [p.detach().clone().requires_grad_(True) for p in params]
    opt = torch.optim.AdamW(ref, lr=lr, weight_decay=wd, betas=(0.9, 0.999), eps=1e-8)
    for g in grads[:steps]:
        for p, gp in zip(ref, g, strict=True):
            p.grad = gp.clone().to(p.device)
        opt.step()
    return ref


def _adam_case(torch, device, n=3):
    gen = torch.Generator().manual_seed(0)
    params = [torch.randn(257, generator=gen).to(device), torch.randn(16, 33, generator=gen)
              .to(device)]
    grads = [[torch.randn(p.shape, generator=gen).to(device) for p in params] for _ in range(n)]
    return params, grads


def _run_adam(torch, opt_cls, device, tol, **kwargs) -> str:
    params, grads = _adam_case(torch, device)
    mine = [p.detach().clone().requires_grad_(True) for p in params]
    opt = opt_cls(mine, lr=1e-2, weight_decay=0.01, betas=(0.9, 0.999), eps=1e-8, **kwargs)
    for g in grads:
        for p, gp in zip(mine, g, strict=True):
            p.grad = gp.clone()
        opt.step()
    ref = _adam_reference(torch, params, grads, len(grads))
    worst = max(float((a.detach().cpu() - b.detach().cpu()).abs().max())
                for a, b in zip(mine, ref, strict=True))
    if not worst <= tol:
        raise AssertionError(f"max |Δ| vs torch.optim.AdamW after {len(grads)} steps is "
                             f"{worst:.3g} (tolerance {tol:g})")
    return f"max |Δ| vs torch.optim.AdamW after {len(grads)} steps: {worst:.2g}"


def ds_fused_adam(torch):
    if not torch.cuda.is_available():
        raise Skip("FusedAdam runs on a GPU")
    from deepspeed.ops.adam import FusedAdam

    return _run_adam(torch, FusedAdam, torch.device("cuda"), 1e-5, adam_w_mode=True)


def ds_cpu_adam(torch):
    from deepspeed.ops.adam import DeepSpeedCPUAdam

    return _run_adam(torch, DeepSpeedCPUAdam, torch.device("cpu"), 1e-5, adamw_mode=True)


def ds_async_io(torch):
    from deepspeed.ops.op_builder import AsyncIOBuilder

    builder = AsyncIOBuilder()
    if not builder.is_compatible(verbose=False):
        raise Skip("AsyncIOBuilder is not compatible here (libaio missing?)")
    aio = builder.load(verbose=False)
    data = torch.arange(1 << 16, dtype=torch.uint8).repeat(4)  # 256 KiB, every byte value
    back = torch.zeros_like(data)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "aio.bin")
        handle = aio.aio_handle(1 << 16, 8, False, False, 1)
        wrote = handle.sync_pwrite(data, path)
        read = handle.sync_pread(back, path)
    if not torch.equal(data, back):
        raise AssertionError("bytes read back differ from bytes written")
    return f"{data.numel()} bytes written and read back equal (returns {wrote}, {read})"


def ds_transformer_inference(torch):
    if not torch.cuda.is_available():
        raise Skip("the transformer inference kernel runs on a GPU")
    from deepspeed.ops.op_builder import InferenceBuilder

    kernels = InferenceBuilder().load(verbose=False)
    torch.manual_seed(0)
    x = torch.randn(4, 64, 256, device="cuda", dtype=torch.float16)
    gamma = torch.randn(256, device="cuda", dtype=torch.float16)
    beta = torch.randn(256, device="cuda", dtype=torch.float16)
    got = kernels.layer_norm(x, gamma, beta, 1e-5)
    want = torch.nn.functional.layer_norm(x.float(), (256,), gamma.float(), beta.float(), 1e-5)
    worst = float((got.float() - want).abs().max())
    if not worst <= 2e-2:
        raise AssertionError(f"layer_norm max |Δ| vs torch is {worst:.3g} (tolerance 2e-2)")
    return f"layer_norm (fp16) max |Δ| vs torch.nn.functional.layer_norm: {worst:.2g}"


# what each op is compared with (the record's "check", also for a skipped op)
REFERENCE = {
    "fused_adam": "3 steps vs torch.optim.AdamW (max |Δ| ≤ 1e-5)",
    "cpu_adam": "3 steps vs torch.optim.AdamW (max |Δ| ≤ 1e-5)",
    "async_io": "256 KiB written and read back byte-equal",
    "transformer_inference": "layer_norm (fp16) vs torch.nn.functional.layer_norm (≤ 2e-2)",
}

OPS = {
    "deepspeed": {"fused_adam": ds_fused_adam, "cpu_adam": ds_cpu_adam,
                  "async_io": ds_async_io, "transformer_inference": ds_transformer_inference},
}


def _prebuilt(framework: str, op: str) -> bool | None:
    if framework == "deepspeed":
        try:
            from deepspeed.git_version_info import installed_ops
        except ImportError:
            return None
        return bool(installed_ops.get(op))
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--framework", required=True, choices=sorted(OPS))
    p.add_argument("--ops", help="comma-separated subset (default: all)")
    p.add_argument("--out", type=Path, help="write the JSON result here (default: stdout)")
    args = p.parse_args(argv)
    import torch

    table = OPS[args.framework]
    names = args.ops.split(",") if args.ops else list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        print(f"unknown op(s) {unknown}; known: {sorted(table)}", file=sys.stderr)
        return 2
    results = []
    for name in names:
        t0 = time.monotonic()
        entry = {"name": name, "prebuilt": _prebuilt(args.framework, name)}
        reference = REFERENCE.get(name, name)
        try:
            detail = table[name](torch)
            entry.update(status="pass", check=f"{reference}: {detail}" if detail else reference,
                         message="")
        except Skip as exc:
            entry.update(status="skip", check=reference, message=str(exc))
        except Exception as exc:
            last = traceback.extract_tb(exc.__traceback__)[-1]
            entry.update(status="fail", check=reference, message=f"{type(exc).__name__}: {exc} "
                         f"({Path(last.filename).name}:{last.lineno})"[:2000])
        entry["seconds"] = round(time.monotonic() - t0, 3)
        # a JIT compile is most of the time when the op was not prebuilt
        entry["build_seconds"] = entry["seconds"] if entry["prebuilt"] is False else None
        results.append(entry)
        print(f"{name:24} {entry['status']:5} {entry['seconds']:7.1f} s  "
              f"{entry['message'] or entry['check']}", file=sys.stderr, flush=True)
    doc = {"schema": SCHEMA, "framework": args.framework, "torch": torch.__version__,
           "torch_cuda": torch.version.cuda, "ops": results}
    text = json.dumps(doc, indent=1) + "\n"
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 1 if any(r["status"] == "fail" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
