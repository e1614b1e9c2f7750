"""A T2 evidence cell built with a real dockerd: the venv flavor of the stand-in combination
(tests/support/lock_env.py), FROM the debootstrap base, whose DeepSpeed wheel carries real
compiled op modules (tests/support/extmod.py), so that `check-ops.py --import` in the runtime
image really loads them: a passing attempt record with every op's result and the image size.

`envgen evidence` has no --network option, and the builder reaches the loopback index only on
the host's network, so the cell runs in-process (run_cell) with the build's RUN steps on
--network host, as tests/lock/test_image_docker.py builds with `envgen build --network host`.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess

import pytest
from support import extmod
from support.index_server import IndexServer
from support.lock_env import CP, MANYLINUX, wheels
from support.run import HOST_PY
from support.wheels import serve_wheels

from envgen.evidence.cells import BuildTarget, build_cells
from envgen.evidence.run import RunOptions, run_cell
from envgen.facts import load_facts
from envgen.image import load_recipes
from envgen.lock.plan import LockOptions
from envgen.results import attempt
from envgen.results.store import add, load

pytestmark = [
    pytest.mark.integration, pytest.mark.docker,
    pytest.mark.skipif(HOST_PY != "3.11", reason="the image's Python is bookworm's 3.11 and the "
                       "stand-in wheels are built for the host's Python"),
    pytest.mark.skipif(not extmod.can_compile(), reason="no C compiler or Python headers to "
                       "build the stand-in ops"),
]
DOCKER = "/usr/bin/docker"
OPS = {"fused_adam": "adam", "cpu_adam": "adam", "transformer_inference": "transformer",
       "async_io": "aio"}


def deepspeed_with_ops(out, build) -> object:
    """deepspeed 0.18.2 as its setup.py leaves it with prebuilt ops: installed_ops, and each
    op a loadable extension module (async_io linked to libcuda.so.1, as the real one is)."""
    files: dict[str, bytes | str] = {
        "deepspeed/__init__.py": "__version__ = '0.18.2'\n",
        "deepspeed/git_version_info.py": f"installed_ops = { {op: True for op in OPS} }\n",
        "deepspeed/ops/__init__.py": "",
        # DeepSpeed's own loader, which check-ops.py --import calls: ALL_OPS[name].load()
        # imports a prebuilt op's module (OpBuilder.load)
        "deepspeed/ops/op_builder/__init__.py": "",
        "deepspeed/ops/op_builder/all_ops.py": (
            "import importlib\n"
            "class Builder:\n"
            "    def __init__(self, module):\n"
            "        self.module = module\n"
            "    def load(self, verbose=True):\n"
            "        return importlib.import_module(self.module)\n"
            "ALL_OPS = {" + ", ".join(f"{op!r}: Builder('deepspeed.ops.{folder}.{op}_op')"
                                     for op, folder in OPS.items()) + "}\n"),
    }
    for op, folder in OPS.items():
        files[f"deepspeed/ops/{folder}/__init__.py"] = ""
        so = extmod.extension(build / folder, f"{op}_op", needs_libcuda=op == "async_io")
        files[f"deepspeed/ops/{folder}/{so.name}"] = so.read_bytes()
    return extmod.binary_wheel(out, "deepspeed", "0.18.2", tag=f"{CP}-{CP}-{MANYLINUX}",
                               files=files, requires=("torch", "ninja", "packaging"))


@pytest.fixture(scope="module")
def ops_index(tmp_path_factory):
    """The stand-in index, with the DeepSpeed wheel replaced by one with real op modules."""
    tmp = tmp_path_factory.mktemp("opsindex")
    served = [w for w in wheels(tmp / "standins") if not w.name.startswith("deepspeed-")]
    served.append(deepspeed_with_ops(tmp / "wheels", tmp / "ops"))
    with IndexServer() as server:
        yield serve_wheels(server, served)


def test_t2_cell_builds_and_loads_its_ops(docker_ready, lock_matrix, ops_index, tmp_path,
                                          monkeypatch):
    import envgen.image.build as image_build

    real = image_build.build_image

    def on_host_network(lock_dir, options, **kw):
        return real(lock_dir, dataclasses.replace(options, network="host"), **kw)

    monkeypatch.setattr(image_build, "build_image", on_host_network)
    facts, recipes = load_facts(lock_matrix), load_recipes(lock_matrix)
    target = BuildTarget("venv", "debian-12", docker_ready["base"])
    (cell,) = build_cells(facts, ("deepspeed",), (target,), {"debian-12": (HOST_PY,)})
    assert cell.id == f"deepspeed-0.18.2-torch2.12.0-cu130-py{HOST_PY}-debian12-x86_64"
    options = RunOptions(lock=LockOptions(index_url=ops_index, cache_dir=tmp_path / "cache"),
                         gpu_archs=("sm_90",), docker_cli=DOCKER, log_dir=tmp_path / "logs",
                         command="envgen evidence --build venv:debian-12="
                                 f"{docker_ready['base']}")
    lines: list[str] = []
    record = run_cell(cell, facts, {"pypi": ops_index}, options, recipes=recipes,
                      progress=lines.append)
    assert attempt.validate(record) == [], attempt.validate(record)
    assert record["status"] == "pass", (record["error"], "\n".join(lines[-40:]))
    build = record["build"]
    try:
        assert build["size_bytes"] > 0 and build["seconds"] > 0
        assert build["arch_list"] == "9.0+PTX" and build["nvcc"] == "13.0"
        assert build["image"]["reference"].startswith(
            f"envgen/deepspeed:0.18.2-torch2.12.0-cu130-py{HOST_PY}-debian12-")
        assert build["image"]["digest"].startswith("sha256:")
        assert {o["name"]: o["status"] for o in build["ops"]} == {
            "fused_adam": "pass", "cpu_adam": "pass", "transformer_inference": "pass",
            # the runtime image has no NVIDIA driver (the builder's stub is not shipped)
            "async_io": "skip"}
        assert "libcuda.so.1" in next(o["message"] for o in build["ops"]
                                      if o["name"] == "async_io")
        assert record["machine"]["docker"]  # the daemon's version
        assert record["command"].startswith("envgen evidence --build venv:debian-12=")
        # stored and read back like every record
        path = tmp_path / "record.json"
        path.write_text(json.dumps(record))
        (outcome,) = add(tmp_path / "results", [path])
        assert outcome.added and outcome.path.parent.name == cell.id
        (back,) = load(tmp_path / "results")
        assert back.record.tier == "T2" and back.record.image_size_bytes == build["size_bytes"]
    finally:  # the content tag is this lock's alone; the human tag may be another test's
        subprocess.run([DOCKER, "image", "rm", build["image"]["reference"]],
                       capture_output=True, timeout=120, check=False)
