"""The image build and the framework's own op builder (read from DeepSpeed's real files in
tests/fixtures/deepspeed_op_builder): an op the combination cannot build is switched off by its
own build variable and not checked; a default arch the builder misreads, or nvcc cannot
target, is left out with the reason in the Dockerfile; a requested one is refused."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from image_inputs import _input

from envgen.errors import UsageError
from envgen.facts import load_facts
from envgen.facts.release_read import build_facts
from envgen.harvest.frameworks import complete_build
from envgen.harvest.op_builder import deepspeed_build_facts
from envgen.image import load_recipes, ops_skipped
from envgen.image.render import ImageOptions, render_image
from envgen.resolve.assemble import ops_unavailable

VENDORED = Path(__file__).parents[1] / "fixtures" / "deepspeed_op_builder"


def read(version: str):
    files = {f"op_builder/{p.name}": p.read_text()
             for p in (VENDORED / version / "op_builder").glob("*.py")}
    return build_facts(complete_build({"read": True, **deepspeed_build_facts(
        files, ["12.1", "12.8", "13.0"])}))


def test_an_unbuildable_op_is_switched_off_and_a_misread_arch_left_out(lock_matrix):
    inp, image, archs = _input(lock_matrix, "deepspeed-conda-ubuntu2204")  # torch 2.9, CUDA 12.8
    assert not image.gpu_archs and "sm_100" in archs  # the recipe's defaults, sm_100 targetable
    build = read("0.10.0")
    c = inp.combination
    torch = next(b for b in load_facts(lock_matrix).torch_builds
                 if (b.version, b.cuda) == (c.torch, c.cuda))
    combo = replace(c, ops_unavailable=ops_unavailable(build, c.torch, c.nvcc, None,
                                                       torch.headers))
    skipped = ops_skipped(combo, build)
    assert ("async_io", "DS_BUILD_AIO") in [(n, v) for n, v, _ in skipped]
    files, section = render_image(replace(inp, combination=combo, framework_build=build,
                                          ops_skipped=skipped),
                                  load_recipes(lock_matrix), image, supported_archs=archs)
    text = files["Dockerfile"]
    assert "DS_BUILD_AIO=0" in text and "DS_BUILD_AIO=1" not in text
    assert "async_io" not in section["ops"] and "fused_adam" in section["ops"]
    assert "# not built: async_io (compiles with -std=c++14 (op_builder/async_io.py:42)" in text
    assert section["cuda_arch_list"] == "8.0;9.0+PTX"
    assert "# not compiled for sm_100: deepspeed " in text and "compute_1." in text
    assert "op_builder/builder.py:" in text.split("# not compiled for sm_100", 1)[1].split("\n")[0]


def test_a_requested_arch_the_builder_raises_on_is_refused(lock_matrix):
    inp, _image, archs = _input(lock_matrix, "deepspeed-conda-ubuntu2204")
    with pytest.raises(UsageError) as exc:
        render_image(replace(inp, framework_build=read("0.19.8")), load_recipes(lock_matrix),
                     ImageOptions(gpu_archs=("sm_90a",)), supported_archs=archs)
    assert "op_builder/builder.py:744" in exc.value.message
    assert "--gpu-arch sm_90" in exc.value.hint
    # a release whose builder reads 9.0a builds it
    _files, section = render_image(replace(inp, framework_build=read("0.16.4")),
                                  load_recipes(lock_matrix), ImageOptions(gpu_archs=("sm_90a",)),
                                  supported_archs=archs)
    assert section["cuda_arch_list"] == "9.0a"
