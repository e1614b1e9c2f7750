"""DeepSpeed's checks: its ops against references, and ZeRO-2 / ZeRO-3 training steps.

Runs inside the env or image under test (imported by ops.py and smoke.py as a top-level
module): standard library, torch and DeepSpeed only.
"""

from __future__ import annotations

import os
import tempfile

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

MODULE = "deepspeed"


def version() -> str:
    import deepspeed

    return deepspeed.__version__


def init_distributed(backend: str, timeout) -> None:
    import deepspeed

    deepspeed.init_distributed(dist_backend=backend, timeout=timeout)


# --- ops ----------------------------------------------------------------------------------

def fused_adam(torch) -> str:
    needs_gpu(torch, "FusedAdam")
    from deepspeed.ops.adam import FusedAdam

    return compare_with_adamw(torch, FusedAdam, torch.device("cuda"), adam_w_mode=True)


def cpu_adam(torch) -> str:
    from deepspeed.ops.adam import DeepSpeedCPUAdam

    return compare_with_adamw(torch, DeepSpeedCPUAdam, torch.device("cpu"), adamw_mode=True)


def async_io(torch) -> str:
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
    expect(torch.equal(data, back), "bytes read back differ from bytes written")
    return f"{data.numel()} bytes written and read back equal (returns {wrote}, {read})"


def transformer_inference(torch) -> str:
    needs_gpu(torch, "the transformer inference kernel")
    from deepspeed.ops.op_builder import InferenceBuilder

    kernels = InferenceBuilder().load(verbose=False)
    torch.manual_seed(0)
    x = torch.randn(4, 64, 256, device="cuda", dtype=torch.float16)
    gamma = torch.randn(256, device="cuda", dtype=torch.float16)
    beta = torch.randn(256, device="cuda", dtype=torch.float16)
    got = kernels.layer_norm(x, gamma, beta, 1e-5)
    want = torch.nn.functional.layer_norm(x.float(), (256,), gamma.float(), beta.float(), 1e-5)
    return close(got, want, 2e-2, "layer_norm (fp16)")


# op name (DeepSpeed's builder name) → (check, what it is compared with)
OPS = {
    "fused_adam": (fused_adam, ADAM_CHECK),
    "cpu_adam": (cpu_adam, ADAM_CHECK),
    "async_io": (async_io, "256 KiB written and read back byte-equal"),
    "transformer_inference": (transformer_inference,
                              "layer_norm (fp16) vs torch.nn.functional.layer_norm (≤ 2e-2)"),
}


def prebuilt(op: str) -> bool | None:
    """Whether the op was compiled at install time (DeepSpeed records it), else JIT."""
    try:
        from deepspeed.git_version_info import installed_ops
    except ImportError:
        return None
    return bool(installed_ops.get(op))


# --- engine -------------------------------------------------------------------------------

def zero(run: EngineRun, stage: int) -> str:
    import deepspeed

    torch = run.torch
    gpu = run.device.type == "cuda"
    model = tiny_model(torch)
    # FusedAdam on GPUs; torch's Adam on CPU (FusedAdam is a CUDA kernel)
    optimizer = ({"type": "Adam", "params": {"lr": 1e-2}} if gpu else
                 {"type": "Adam", "params": {"lr": 1e-2, "torch_adam": True}})
    config = {"train_micro_batch_size_per_gpu": 32, "gradient_accumulation_steps": 1,
              "optimizer": optimizer, "zero_optimization": {"stage": stage},
              "steps_per_print": 10**9, "wall_clock_breakdown": False}
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                      config=config)
    x, y = batch(torch, run.rank, run.device)
    losses = []
    for _ in range(run.steps):
        loss = torch.nn.functional.mse_loss(engine(x), y)
        engine.backward(loss)
        engine.step()
        losses.append(loss.item())
    loss_decreased(losses)
    params = list(engine.module.parameters())
    if stage == 3:  # partitioned: gather the full parameters to compare them
        with deepspeed.zero.GatheredParameters(params):
            same_everywhere(run, params)
    else:
        same_everywhere(run, params)
    return f"ZeRO-{stage}, {type(engine.optimizer).__name__}, loss {losses[0]:.4f} → " \
           f"{losses[-1]:.4f}"


ENGINES = {
    "deepspeed_zero2": lambda run: zero(run, 2),
    "deepspeed_zero3": lambda run: zero(run, 3),
}
