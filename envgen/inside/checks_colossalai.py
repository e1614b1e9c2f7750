"""Colossal-AI's checks: its compiled extensions against references, and training steps
through its Booster (TorchDDPPlugin everywhere; LowLevelZeroPlugin ZeRO-2 with HybridAdam on
GPUs).

Runs inside the env or image under test (imported by ops.py and smoke.py as a top-level
module): standard library, torch and Colossal-AI only.

The op names are Colossal-AI's extension names (``colossalai._C.<name>`` when prebuilt with
BUILD_EXT=1, else JIT-built by its kernel loaders). Every extension, its CPU Adam included,
is a CUDA extension that loads only where CUDA is available, so without a GPU they all skip;
so does the ZeRO plugin, whose optimizer asserts a CUDA or NPU accelerator.
"""

from __future__ import annotations

import platform

from checks_common import (
    ADAM_CHECK,
    EngineRun,
    Skip,
    batch,
    close,
    compare_with_adamw,
    expect,
    loss_decreased,
    needs_gpu,
    same_everywhere,
    tiny_model,
)

MODULE = "colossalai"


def version() -> str:
    import colossalai

    return colossalai.__version__


# --- ops ----------------------------------------------------------------------------------

def _cpu_adam_extension() -> str:
    return "cpu_adam_arm" if platform.machine() in ("aarch64", "arm64") else "cpu_adam_x86"


def cpu_adam(torch) -> str:
    if not torch.cuda.is_available():
        raise Skip(f"Colossal-AI builds its CPU Adam ({_cpu_adam_extension()}) as a CUDA "
                   "extension, which loads only where CUDA is available")
    from colossalai.nn.optimizer import CPUAdam

    return compare_with_adamw(torch, CPUAdam, torch.device("cpu"), adamw_mode=True)


def fused_optim_cuda(torch) -> str:
    needs_gpu(torch, "FusedAdam (fused_optim_cuda)")
    from colossalai.nn.optimizer import FusedAdam

    return compare_with_adamw(torch, FusedAdam, torch.device("cuda"), adamw_mode=True)


def layernorm_cuda(torch) -> str:
    needs_gpu(torch, "the fused layer norm (layernorm_cuda)")
    from colossalai.nn.layer.layernorm import MixedFusedLayerNorm

    torch.manual_seed(0)
    norm = MixedFusedLayerNorm(256).cuda()
    with torch.no_grad():
        norm.weight.copy_(torch.randn(256))
        norm.bias.copy_(torch.randn(256))
    x = torch.randn(8, 64, 256, device="cuda")
    with torch.no_grad():
        got = norm(x)
        want = torch.nn.functional.layer_norm(x, (256,), norm.weight, norm.bias, 1e-5)
    return close(got, want, 1e-4, "layer norm")


def _scores(torch):
    torch.manual_seed(0)
    return torch.randn(2, 4, 128, 128, device="cuda", dtype=torch.float16)


def scaled_masked_softmax_cuda(torch) -> str:
    needs_gpu(torch, "the scaled masked softmax")
    from colossalai.kernel.kernel_loader import ScaledMaskedSoftmaxLoader

    kernel = ScaledMaskedSoftmaxLoader().load()
    x, scale = _scores(torch), 0.125
    mask = torch.rand(2, 1, 128, 128, device="cuda") < 0.3  # True: masked out
    got = kernel.forward(x, mask, scale)
    want = torch.softmax((x.float() * scale).masked_fill(mask, -10000.0), dim=-1)
    return close(got, want, 2e-3, "masked softmax")


def scaled_upper_triangle_masked_softmax_cuda(torch) -> str:
    needs_gpu(torch, "the causal scaled softmax")
    from colossalai.kernel.kernel_loader import ScaledUpperTriangleMaskedSoftmaxLoader

    kernel = ScaledUpperTriangleMaskedSoftmaxLoader().load()
    x, scale = _scores(torch).view(8, 128, 128), 0.125
    got = kernel.forward(x, scale)
    causal = torch.ones(128, 128, device="cuda", dtype=torch.bool).triu(1)
    want = torch.softmax((x.float() * scale).masked_fill(causal, float("-inf")), dim=-1)
    return close(got, want, 2e-3, "causal softmax")


def inference_ops_cuda(torch) -> str:
    needs_gpu(torch, "the inference kernels")
    from colossalai.kernel.kernel_loader import InferenceOpsLoader

    kernels = InferenceOpsLoader().load()
    torch.manual_seed(0)
    gate_up = torch.randn(2, 16, 256, device="cuda", dtype=torch.float16)
    got = kernels.silu_and_mul(gate_up)  # splits dim 0: silu(first half) * second half
    want = torch.nn.functional.silu(gate_up[0].float()) * gate_up[1].float()
    silu = close(got, want, 2e-2, "silu_and_mul")
    x = torch.randn(16, 256, device="cuda", dtype=torch.float16)
    weight = torch.randn(256, device="cuda", dtype=torch.float16)
    out = torch.empty_like(x)
    kernels.rms_layernorm(out, x, weight, 1e-5)
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()
    return f"{silu}, {close(out, ref, 2e-2, 'rms_layernorm')}"


def moe_cuda(torch) -> str:
    needs_gpu(torch, "the MoE kernels")
    from colossalai.kernel.kernel_loader import MoeLoader

    kernels = MoeLoader().load()
    gen = torch.Generator().manual_seed(0)
    mask = (torch.rand(64, 4, generator=gen) < 0.5).to(torch.int32).cuda()
    got = kernels.cumsum_sub_one(mask)
    want = torch.cumsum(mask, dim=0).to(torch.int32) - 1
    expect(torch.equal(got, want), "cumsum_sub_one differs from torch.cumsum(mask, 0) - 1")
    return "cumsum_sub_one equals torch.cumsum(mask, 0) - 1"


SOFTMAX_CHECK = "fp16 vs torch.softmax (≤ 2e-3)"
OPS = {
    "cpu_adam": (cpu_adam, ADAM_CHECK),
    "fused_optim_cuda": (fused_optim_cuda, ADAM_CHECK + " (FusedAdam)"),
    "layernorm_cuda": (layernorm_cuda, "MixedFusedLayerNorm vs torch layer_norm (≤ 1e-4)"),
    "scaled_masked_softmax_cuda": (scaled_masked_softmax_cuda, SOFTMAX_CHECK),
    "scaled_upper_triangle_masked_softmax_cuda": (scaled_upper_triangle_masked_softmax_cuda,
                                                  SOFTMAX_CHECK),
    "inference_ops_cuda": (inference_ops_cuda, "silu_and_mul and rms_layernorm (fp16) vs torch "
                           "(≤ 2e-2)"),
    "moe_cuda": (moe_cuda, "cumsum_sub_one vs torch.cumsum (exact)"),
}


def prebuilt(op: str) -> bool | None:
    """Whether the extension was compiled at install time (BUILD_EXT=1: colossalai._C.<name>);
    otherwise its kernel loader JIT-builds it on first use."""
    import importlib.util

    name = _cpu_adam_extension() if op == "cpu_adam" else op
    try:
        return importlib.util.find_spec(f"colossalai._C.{name}") is not None
    except ImportError:  # no colossalai._C package at all
        return False


# --- engine -------------------------------------------------------------------------------

def _boosted_steps(run: EngineRun, plugin, optimizer_cls) -> tuple[list[float], str]:
    """A few boosted steps on each rank's own batch; returns the losses and the optimizer."""
    from colossalai.booster import Booster

    torch = run.torch
    model = tiny_model(torch).to(run.device)
    optimizer = optimizer_cls(model.parameters(), lr=1e-2)
    booster = Booster(plugin=plugin)
    model, optimizer, *_ = booster.boost(model, optimizer)
    x, y = batch(torch, run.rank, run.device)  # data parallel: a different batch per rank
    losses = []
    for _ in range(run.steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        booster.backward(loss, optimizer)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    loss_decreased(losses)
    same_everywhere(run, list(model.parameters()))
    inner = getattr(optimizer, "optim", optimizer)  # the booster wraps the optimizer
    return losses, type(inner).__name__


def ddp(run: EngineRun) -> str:
    from colossalai.booster.plugin import TorchDDPPlugin

    losses, opt = _boosted_steps(run, TorchDDPPlugin(), run.torch.optim.Adam)
    return f"TorchDDPPlugin, {opt}, loss {losses[0]:.4f} → {losses[-1]:.4f}"


def zero2(run: EngineRun) -> str:
    if run.device.type != "cuda":
        raise Skip("LowLevelZeroPlugin needs GPUs (its optimizer asserts a cuda or npu "
                   "accelerator)")
    from colossalai.booster.plugin import LowLevelZeroPlugin
    from colossalai.nn.optimizer import HybridAdam

    plugin = LowLevelZeroPlugin(stage=2, precision="fp32")
    losses, opt = _boosted_steps(run, plugin, HybridAdam)
    return f"LowLevelZeroPlugin ZeRO-2, {opt}, loss {losses[0]:.4f} → {losses[-1]:.4f}"


ENGINES = {"colossalai_ddp": ddp, "colossalai_zero2": zero2}
