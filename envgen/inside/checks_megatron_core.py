"""Megatron-Core's checks: its compiled dataset index builder against a NumPy reference, and
training steps of a tensor-parallel MLP (tensor parallel = world size).

Runs inside the env or image under test (imported by ops.py and smoke.py as a top-level
module): standard library, torch, NumPy (a Megatron-Core dependency) and Megatron-Core only.

Megatron-Core's own compiled piece is ``megatron.core.datasets.helpers_cpp`` (the fused
kernels come from Transformer Engine / Apex, which envgen does not install). Its GPT model
needs CUDA even to run attention, so the engine check trains Megatron-Core's tensor-parallel
layers (ColumnParallelLinear → GeLU → RowParallelLinear), which run on GPUs with NCCL and on
CPU with gloo alike.
"""

from __future__ import annotations

from checks_common import EngineRun, batch, close, expect, loss_decreased, same_everywhere

MODULE = "megatron.core"


def version() -> str:
    import megatron.core

    return getattr(megatron.core, "__version__", None) or _package_version()


def _package_version() -> str:
    from megatron.core import package_info

    return package_info.__version__


# --- ops ----------------------------------------------------------------------------------

def _doc_sizes(np):
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 200, size=300).astype(np.int32)
    order = rng.permutation(len(sizes)).astype(np.int32)
    return sizes, order


def sample_idx_reference(np, sizes, order, seq_length: int):
    """Where each GPT sample starts: sample k begins at token k × seq_length of the documents
    concatenated in ``order``, as (index into ``order``, offset in that document); one extra
    token per sample (the label shift), the last partial sample dropped."""
    lengths = sizes[order].astype(np.int64)
    ends = np.cumsum(lengths)
    count = (int(ends[-1]) - 1) // seq_length
    starts = np.arange(count + 1, dtype=np.int64) * seq_length
    doc = np.searchsorted(ends, starts, side="right")
    offset = starts - (ends[doc] - lengths[doc])
    return np.stack([doc, offset], axis=1)


def _compiled_helpers_spec():
    """The compiled module: helpers_cpp (helpers.py wraps it), or before that rename the
    extension named helpers itself; None when it was not built at install time."""
    import importlib.util

    for name in ("helpers_cpp", "helpers"):
        spec = importlib.util.find_spec(f"megatron.core.datasets.{name}")
        if spec is not None and spec.origin and not spec.origin.endswith(".py"):
            return spec
    return None


def _load_helpers():
    import importlib

    spec = _compiled_helpers_spec()
    if spec is None:  # build it as Megatron-Core does at run time (make in the package)
        from megatron.core.datasets.utils import compile_helpers

        try:
            compile_helpers()
        except SystemExit as exc:  # it logs and exits on a failed make
            raise AssertionError("compile_helpers() could not build the C++ dataset helpers: "
                                 "it runs make in megatron/core/datasets, which needs the "
                                 "Makefile of a source install, a C++ compiler and pybind11; "
                                 "install a platform wheel, which ships them compiled") from exc
        importlib.invalidate_caches()
        spec = _compiled_helpers_spec()
        if spec is None:
            raise AssertionError("compile_helpers() ran but no compiled helpers module "
                                 "appeared")
    return importlib.import_module(spec.name)


def helpers_cpp(torch) -> str:
    import numpy as np

    helpers = _load_helpers()
    sizes, order = _doc_sizes(np)
    seq_length = 64
    tokens = int(sizes.sum())
    if hasattr(helpers, "build_sample_idx_int32"):  # the typed variants of newer releases
        got = helpers.build_sample_idx_int32(sizes, order, seq_length, 1, tokens, True, 1)
    else:
        got = helpers.build_sample_idx(sizes, order, seq_length, 1, tokens)
    want = sample_idx_reference(np, sizes, order, seq_length)
    expect(got.shape == want.shape, f"build_sample_idx shape {got.shape}, want {want.shape}")
    bad = np.argwhere(got != want)
    expect(bad.size == 0, f"build_sample_idx differs from the reference at {bad[:3].tolist()}")

    weights = np.array([0.5, 0.3, 0.2])
    size = 1000
    index = np.zeros(size, dtype=np.int16)
    sample = np.zeros(size, dtype=np.int64)
    helpers.build_blending_indices(index, sample, weights, len(weights), size, False)
    want_index, want_sample = blending_reference(np, weights, size)
    expect(np.array_equal(index, want_index) and np.array_equal(sample, want_sample),
           "build_blending_indices differs from the reference")
    return f"build_sample_idx over {len(sizes)} documents ({len(want)} samples) and " \
           f"build_blending_indices ({size} samples) equal the reference"


def blending_reference(np, weights, size: int):
    """Greedy blending: each sample goes to the dataset furthest below its share."""
    index = np.zeros(size, dtype=np.int16)
    sample = np.zeros(size, dtype=np.int64)
    taken = np.zeros(len(weights), dtype=np.int64)
    for i in range(size):
        errors = weights * max(i, 1) - taken
        best = int(np.argmax(errors))  # first of equal maxima, as the C++ loop keeps it
        index[i], sample[i] = best, taken[best]
        taken[best] += 1
    return index, sample


OPS = {
    "helpers_cpp": (helpers_cpp, "build_sample_idx and build_blending_indices vs a NumPy "
                    "reference (exact)"),
}


def prebuilt(op: str) -> bool | None:
    """The helpers ship compiled in the platform wheels; otherwise Megatron-Core builds them
    at run time (megatron.core.datasets.utils.compile_helpers)."""
    return _compiled_helpers_spec() is not None


# --- engine -------------------------------------------------------------------------------

def tensor_parallel(run: EngineRun) -> str:
    from megatron.core import parallel_state
    from megatron.core import tensor_parallel as tp
    from megatron.core.model_parallel_config import ModelParallelConfig

    torch, world = run.torch, run.world
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=world)
    try:
        # initialised on CPU from one seed (identical master weights, then split), so the
        # same code runs with gloo and NCCL; moved to the device afterwards
        config = ModelParallelConfig(tensor_model_parallel_size=world,
                                     use_cpu_initialization=True)
        torch.manual_seed(0)
        init = torch.nn.init.xavier_normal_
        column = tp.ColumnParallelLinear(16, 64, config=config, init_method=init, bias=True,
                                         gather_output=False)
        row = tp.RowParallelLinear(64, 1, config=config, init_method=init, bias=True,
                                   input_is_parallel=True, skip_bias_add=False)
        column.to(run.device)
        row.to(run.device)
        expect(column.weight.shape[0] * world == 64,
               f"ColumnParallelLinear holds {column.weight.shape[0]} of 64 rows on a "
               f"tensor-parallel group of {world}")

        def forward(x):
            hidden, _ = column(x)
            out, _ = row(torch.nn.functional.gelu(hidden))
            return out

        params = [*column.parameters(), *row.parameters()]
        opt = torch.optim.Adam(params, lr=1e-2)
        x, y = batch(torch, 0, run.device)  # tensor parallel: every rank sees the same batch
        losses = []
        for _ in range(run.steps):
            loss = torch.nn.functional.mse_loss(forward(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        loss_decreased(losses)
        same_everywhere(run, [row.bias], "the replicated RowParallelLinear bias")
        dense = _versus_dense(run, column, row, forward, x)
        return f"TP={world}, loss {losses[0]:.4f} → {losses[-1]:.4f}, {dense}"
    finally:
        parallel_state.destroy_model_parallel()


def _versus_dense(run: EngineRun, column, row, forward, x) -> str:
    """The sharded forward must equal the dense MLP built from the gathered shards."""
    torch, dist = run.torch, run.dist

    def gather(t, dim):
        parts = [torch.empty_like(t) for _ in range(run.world)]
        dist.all_gather(parts, t.detach().contiguous())
        return torch.cat(parts, dim)

    with torch.no_grad():
        w1, b1 = gather(column.weight, 0), gather(column.bias, 0)
        w2 = gather(row.weight, 1)
        dense = torch.nn.functional.gelu(x @ w1.T + b1) @ w2.T + row.bias
        return close(forward(x), dense, 1e-4, "output vs the dense MLP of the gathered shards")


ENGINES = {"megatron_tensor_parallel": tensor_parallel}
