"""Where the verify scripts run: the commands for an interpreter here and for an image."""

from __future__ import annotations

from pathlib import Path

from envgen import inside
from envgen.verify.launch import IN_IMAGE, SCRIPTS_DIR, Target


def test_local_target_runs_the_script_with_the_given_python(tmp_path):
    argv = Target(python="/env/bin/python").argv("ops.py", ["--out", "{out}/ops.json"], tmp_path)
    assert argv == ["/env/bin/python", str(inside.path("ops.py")), "--out",
                    f"{tmp_path}/ops.json"]


def test_image_target_mounts_scripts_and_output(tmp_path):
    target = Target(image="envgen/deepspeed:t", docker="/usr/bin/docker", gpus=True)
    out = target.prepare(tmp_path)
    assert out.stat().st_mode & 0o777 == 0o777  # uid 1000 in the image writes there
    argv = target.argv("smoke.py", ["--out", "{out}"], out,
                       torchrun=["-m", "torch.distributed.run", "--nproc_per_node=8"])
    assert argv[:3] == ["/usr/bin/docker", "run", "--rm"]
    assert argv[argv.index("--gpus"):argv.index("--gpus") + 2] == ["--gpus", "all"]
    assert f"{SCRIPTS_DIR}:{IN_IMAGE}:ro" in argv and f"{out}:/out" in argv
    tail = argv[argv.index("envgen/deepspeed:t"):]
    assert tail == ["envgen/deepspeed:t", "python", "-m", "torch.distributed.run",
                    "--nproc_per_node=8", f"{IN_IMAGE}/smoke.py", "--out", "/out"]
    assert "--gpus" not in Target(image="x").argv("ops.py", [], Path("/tmp"))
