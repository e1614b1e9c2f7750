"""Each launcher's view (envgen.preflight.launchers, from matrix/curated/preflight.toml
[[launcher]]) against the launcher's own code and manual (tests/fixtures/launchers, unmodified,
with their sources): DeepSpeed 0.19.8's runners build their real mpirun / srun command lines
from a shell's variables and a .deepspeed_env, torch 2.13.0's own option parser picks
torchrun's master address and port from the environment, its agent's worker-environment code
runs with stub objects, and the srun / mpirun manuals' sentences say what the records say."""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import re
import sys
import textwrap
import types
from pathlib import Path

import pytest

from envgen.preflight.catalog import load_catalog
from envgen.preflight.launchers import launch_port, launcher_view, master_choice

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "launchers"


@pytest.fixture
def catalog(fixture_matrix):
    return load_catalog(fixture_matrix)


# ---------------------------------------------------------------- DeepSpeed 0.19.8's runners


class _Accelerator:
    """What the runners ask of DeepSpeed's accelerator: the CUDA accelerator's export list
    (accelerator/cuda_accelerator.py export_envs: ['NCCL']); a CPU device name, so MVAPICH adds
    no MV2_USE_CUDA (the record leaves it out for GPU-less nodes)."""

    def export_envs(self):
        return ["NCCL"]

    def device_name(self):
        return "cpu"


@pytest.fixture
def ds(tmp_path, monkeypatch):
    """deepspeed/launcher/multinode_runner.py of 0.19.8, loaded with stub deepspeed modules
    for its three imports (the accelerator, the logger, the constants)."""
    pkg = types.ModuleType("deepspeed")
    pkg.__path__ = []
    accel = types.ModuleType("deepspeed.accelerator")
    accel.get_accelerator = _Accelerator
    utils = types.ModuleType("deepspeed.utils")
    utils.logger = types.SimpleNamespace(info=lambda *a, **k: None)
    utils.get_numactl_cmd = lambda *a, **k: []
    launcher = types.ModuleType("deepspeed.launcher")
    launcher.__path__ = []
    constants = types.ModuleType("deepspeed.launcher.constants")
    constants.PDSH_MAX_FAN_OUT = 1024
    constants.MVAPICH_TMP_HOSTFILE = str(tmp_path / "mvapich_hostfile")
    for name, mod in (("deepspeed", pkg), ("deepspeed.accelerator", accel),
                      ("deepspeed.utils", utils), ("deepspeed.launcher", launcher),
                      ("deepspeed.launcher.constants", constants)):
        monkeypatch.setitem(sys.modules, name, mod)
    spec = importlib.util.spec_from_file_location(
        "deepspeed.launcher.multinode_runner", HERE / "deepspeed-0.19.8-multinode_runner.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def _exports_loop(runner, env: dict[str, str], home: Path, cwd: Path) -> None:
    """runner.py L585-L611 of 0.19.8, run as written: PYTHONPATH, the prefixes, the env files."""
    code = textwrap.dedent((HERE / "deepspeed-0.19.8-runner-L585-L611.py").read_text())
    exec(code, {
        "os": os, "env": env, "runner": runner, "get_accelerator": _Accelerator,
        "EXPORT_ENVS": ["MLFLOW", "PYTHON", "MV2", "UCX"],  # runner.py L36
        "EXCLUDE_ENVS": {"AISC_JOB_NAME": ["NCCL_IB_HCA", "UCX_NET_DEVICES"]},  # L43
        "DEEPSPEED_ENVIRONMENT_NAME": ".deepspeed_env",
        "DEEPSPEED_ENVIRONMENT_PATHS": [str(home), "."],
        "logger": types.SimpleNamespace(info=lambda *a, **k: None)})


def _args(hostfile: Path) -> argparse.Namespace:
    return argparse.Namespace(
        user_args=["--epochs", "1"], user_script="train.py", launcher_args="", include="",
        exclude="", num_nodes=-1, num_gpus=-1, hostfile=str(hostfile), no_python=False,
        module=False, master_addr="10.0.0.1", master_port=29600, slurm_comment="",
        detect_nvlink_pairs=False)


def _launch(ds, runner_name: str, tmp_path: Path, monkeypatch, environ: dict[str, str],
            env_file: str) -> list[str]:
    home, cwd = tmp_path / "home", tmp_path / "job"
    home.mkdir()
    cwd.mkdir()
    (home / ".deepspeed_env").write_text(env_file)
    monkeypatch.chdir(cwd)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("node0 slots=1\nnode1 slots=1\n")
    pool = {"node0": 1, "node1": 1}
    runner = getattr(ds, runner_name)(_args(hostfile), "e30=", pool)
    env = dict(environ)
    _exports_loop(runner, env, home, cwd)
    return runner.get_cmd(env, {"node0": [0], "node1": [0]})


ENVIRON = {"NCCL_DEBUG": "INFO", "UCX_TLS": "rc", "PYTHONPATH": "/lib", "WANDB_KEY": "k",
           "HOME": "/root", "GLOO_SOCKET_IFNAME": "eth1"}
ENV_FILE = "GLOO_SOCKET_IFNAME=ib0\nOMP_NUM_THREADS = 4 \n"


def _view(catalog, rule_id: str, tmp_path: Path):
    return launcher_view(catalog, catalog.launcher(rule_id), ENVIRON, cwd=tmp_path / "job",
                         home=tmp_path / "home")


def _pairs(words: list[str], flag: str) -> dict[str, str]:
    return dict(w.split("=", 1) for f, w in itertools.pairwise(words) if f == flag)


def test_openmpi_runner_passes_what_the_view_exports(ds, catalog, tmp_path, monkeypatch):
    cmd = _launch(ds, "OpenMPIRunner", tmp_path, monkeypatch, ENVIRON, ENV_FILE)
    passed = _pairs(cmd, "-x")
    view = _view(catalog, "deepspeed-openmpi", tmp_path)
    assert passed == view.exports
    assert passed["UCX_TLS"] == "rc"  # the shell's value replaces the runner's own tcp
    assert passed["GLOO_SOCKET_IFNAME"] == "ib0" and "WANDB_KEY" not in passed
    i = cmd.index("btl_tcp_if_include")  # the interface it pins MPI's TCP transport to
    assert [cmd[i + 1]] == list(catalog.launcher("deepspeed-openmpi").interfaces)
    # no master address or port reaches the ranks: they discover it themselves
    assert not any("10.0.0.1" in w or "29600" in w for w in cmd)


def test_openmpi_runner_adds_ucx_tls_when_the_shell_has_none(ds, catalog, tmp_path,
                                                              monkeypatch):
    environ = {k: v for k, v in ENVIRON.items() if k != "UCX_TLS"}
    cmd = _launch(ds, "OpenMPIRunner", tmp_path, monkeypatch, environ, ENV_FILE)
    view = launcher_view(catalog, catalog.launcher("deepspeed-openmpi"), environ,
                         cwd=tmp_path / "job", home=tmp_path / "home")
    assert _pairs(cmd, "-x") == view.exports and view.exports["UCX_TLS"] == "tcp"


def test_mvapich_runner_passes_what_the_view_exports(ds, catalog, tmp_path, monkeypatch):
    cmd = _launch(ds, "MVAPICHRunner", tmp_path, monkeypatch, ENVIRON, ENV_FILE)
    assert _pairs(cmd, "-env") == _view(catalog, "deepspeed-mvapich", tmp_path).exports


def test_slurm_runner_passes_what_the_view_exports(ds, catalog, tmp_path, monkeypatch):
    cmd = _launch(ds, "SlurmRunner", tmp_path, monkeypatch, ENVIRON, ENV_FILE)
    [export] = [w for w in cmd if w.startswith("--export=")]
    words = export.split("=", 1)[1].split(",")
    assert words[0] == "ALL"
    given = dict(w.split("=", 1) for w in words[1:])
    view = _view(catalog, "deepspeed-slurm", tmp_path)
    assert catalog.launcher("deepspeed-slurm").session == "caller"
    for k, v in given.items():
        # srun(1): with ALL the caller's value wins over the one given; else the one given
        assert view.exports[k] == ENVIRON.get(k, v), k
    assert view.exports["GLOO_SOCKET_IFNAME"] == "eth1"  # this shell's, not the file's ib0


def test_pdsh_runner_exports_what_the_view_exports(ds, catalog, tmp_path, monkeypatch):
    home, cwd = tmp_path / "home", tmp_path / "job"
    home.mkdir()
    cwd.mkdir()
    (home / ".deepspeed_env").write_text(ENV_FILE)
    monkeypatch.chdir(cwd)
    args = _args(tmp_path / "hostfile")
    for name in ("ssh_port", "venv_script", "no_local_rank", "save_pid",
                 "enable_each_rank_log"):  # what PDSHRunner.get_cmd reads besides
        setattr(args, name, None)
    runner = ds.PDSHRunner(args, "e30=")
    env = dict(ENVIRON)
    _exports_loop(runner, env, home, cwd)
    cmd, _kill, _env = runner.get_cmd(env, {"node0": [0], "node1": [0]})
    line = next(w for w in cmd if w.startswith("export "))
    exported = dict(part.split(" ", 1)[1].split("=", 1)
                    for part in line.split("; ") if part.startswith("export "))
    assert exported == _view(catalog, "deepspeed", tmp_path).exports
    assert f"--master_addr={args.master_addr}" in cmd


# ---------------------------------------------------------------- torch 2.13.0's torchrun


def _torchrun_parser(monkeypatch, environ: dict[str, str]) -> argparse.ArgumentParser:
    """torchrun's --master-addr / --master-port as run.py L628-L647 declares them, with its own
    argparse_util.env action (which reads PET_* when the option is declared)."""
    for k in [k for k in os.environ if k.startswith("PET_") or k.startswith("MASTER_")]:
        monkeypatch.delenv(k)
    for k, v in environ.items():
        monkeypatch.setenv(k, v)
    util: dict = {}
    exec((HERE / "torch-2.13.0-argparse_util.py").read_text(), util)
    parser = argparse.ArgumentParser()
    for name in ("torch-2.13.0-run-L445-L460.py", "torch-2.13.0-run-L628-L647.py"):
        code = textwrap.dedent((HERE / name).read_text())
        exec(code.replace("action=env", "action=util_env"),
             {"parser": parser, "util_env": util["env"]})
    return parser


def _torchrun_endpoint(args: argparse.Namespace) -> tuple[str, int]:
    """The static rendezvous endpoint torchrun uses, by its own get_rdzv_endpoint (run.py
    L790-L793) after run() defaults the port (L1014-L1016), split at the last ':'."""
    scope: dict = {}
    exec((HERE / "torch-2.13.0-run-L790-L793.py").read_text(), scope)
    if args.master_port is None:
        args.master_port = 29500
    host, _, port = scope["get_rdzv_endpoint"](args).rpartition(":")
    return host, int(port)


@pytest.mark.parametrize("environ, given", [
    ({}, {}),
    ({"MASTER_ADDR": "node0", "MASTER_PORT": "29601"}, {}),  # not read by torchrun
    ({"PET_MASTER_ADDR": "node7", "PET_MASTER_PORT": "29602"}, {}),
    ({}, {"--master-addr": "node0"}),
    ({"PET_RDZV_ENDPOINT": "node5:29700"}, {"--master-addr": "node0"}),  # the endpoint wins
])
def test_torchrun_picks_the_master_as_its_own_parser_does(catalog, monkeypatch, environ, given):
    parser = _torchrun_parser(monkeypatch, environ)
    argv = [w for kv in given.items() for w in kv]
    want = _torchrun_endpoint(parser.parse_args(argv))
    rule = catalog.launcher("torchrun")
    master_from = ("--master-addr" if given else
                   "MASTER_ADDR" if "MASTER_ADDR" in environ else "first node")
    port_from = "MASTER_PORT" if "MASTER_PORT" in environ else "default"
    addr, port, said, why = master_choice(
        rule, first="node0", first_facts=None, master_addr=given.get("--master-addr", "node0"),
        master_from=master_from, port=int(environ.get("MASTER_PORT", 29500)),
        port_from=port_from, environ=environ, exported={})
    assert (addr, port) == want, said
    assert (why is not None) == (want[0] == "127.0.0.1")
    assert launch_port(rule, port=int(environ.get("MASTER_PORT", 29500)), port_from=port_from,
                       environ=environ)[0] == want[1]


def test_torchrun_workers_get_what_the_view_adds(catalog, monkeypatch):
    """local_elastic_agent.py L415-L436 run with stub worker objects: the variables the view
    says torchrun adds have the values it gives them, where the shell has none."""
    monkeypatch.delenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    ns = types.SimpleNamespace
    scope = {
        "os": os, "worker": ns(global_rank=1, role_rank=1, world_size=2, role_world_size=2),
        "worker_group": ns(group_rank=1, group_world_size=2, master_addr="node0",
                           master_port=29500),
        "spec": ns(role="default", local_world_size=1, max_restarts=0,
                   rdzv_handler=ns(get_run_id=lambda: "none")),
        "restart_count": 0, "use_agent_store": True, "local_rank": 0,
        "self": ns(_set_local_rank_env=lambda env, lr, spec: env.update(LOCAL_RANK=str(lr))),
    }
    code = textwrap.dedent((HERE / "torch-2.13.0-local_elastic_agent-L415-L436.py").read_text())
    exec(code, scope)
    worker_env = scope["worker_env"]
    view = launcher_view(catalog, catalog.launcher("torchrun"), {}, cwd=Path("/"),
                         home=Path("/"))
    assert view.exports and all(worker_env[k] == v for k, v in view.exports.items())
    assert set(catalog.launcher("torchrun").rank_vars) <= set(worker_env) | {
        "TORCHELASTIC_RUN_ID"}
    assert "OMP_NUM_THREADS" not in worker_env  # set only with several ranks a node (run.py)
    several = launcher_view(catalog, catalog.launcher("torchrun"), {}, cwd=Path("/"),
                            home=Path("/"), several=True)
    assert several.exports["OMP_NUM_THREADS"] == "1"


# ---------------------------------------------------------------- srun and mpirun's manuals


def _text(name: str) -> str:
    return " ".join(re.sub(r"\\f[BRIP]|\\-|\\", lambda m: "-" if m.group() == "\\-" else "",
                           (HERE / name).read_text()).split())


def test_srun_carries_the_whole_environment_by_default(catalog, tmp_path):
    text = _text("srun-slurm-25-11-7-1-L1207-L1256.1")
    assert "--export=ALL Default mode if --export is not specified. All of the user's " \
           "environment will be loaded from the caller's environment." in text
    assert "will take precedence over any explicitly given environment variables" in text
    rule = catalog.launcher("srun")
    assert rule.forwards == "all" and rule.session == "caller"
    environ = {"GLOO_SOCKET_IFNAME": "eth1", "PATH": "/opt/env/bin:/usr/bin", "SECRET_TOKEN": "x"}
    view = launcher_view(catalog, rule, environ, cwd=tmp_path, home=tmp_path,
                         listed={"GLOO_SOCKET_IFNAME": "ib0", "EXTRA": "1"})
    assert view.exports["GLOO_SOCKET_IFNAME"] == "eth1"  # ALL: the caller's value wins
    assert view.exports["EXTRA"] == "1" and view.exports["PATH"] == "/opt/env/bin:/usr/bin"
    assert "SECRET_TOKEN" not in view.exports  # carried by srun, never shown or put on argv
    assert view.notes and "1 more variables" in view.notes[0]


def test_mpirun_passes_only_what_it_is_told_and_ompi_variables(catalog, tmp_path):
    text = _text("mpirun-ompi-v5.0.9-L402-L416.rst")
    assert "-x <env>``: Export the specified environment variables to the remote nodes" \
           in text
    assert "All environment variables that are named in the form ``OMPI_*`` will " \
           "automatically be exported" in _text("mpirun-ompi-v5.0.9-L1500-L1511.rst")
    ranks = _text("environment-var-ompi-v5.0.9-L1-L21.rst")
    rule = catalog.launcher("mpirun")
    assert all(f"``{v}``" in ranks for v in rule.rank_vars)
    assert rule.forwards == "listed" and rule.listed_prefixes == ("OMPI_",)
    environ = {"GLOO_SOCKET_IFNAME": "eth1", "OMPI_MCA_btl": "^openib", "NCCL_DEBUG": "INFO"}
    view = launcher_view(catalog, rule, environ, cwd=tmp_path, home=tmp_path,
                         listed={"NCCL_DEBUG": None, "MASTER_ADDR": "node0"})
    assert view.exports == {"NCCL_DEBUG": "INFO", "MASTER_ADDR": "node0",
                            "OMPI_MCA_btl": "^openib"}
    addr, _port, said, _why = master_choice(
        rule, first="node0", first_facts=None, master_addr="node0", master_from="first node",
        port=29500, port_from="default", environ=environ, exported=view.exports)
    assert addr == "node0" and "passed by the launcher" in said


def test_mpi_modes_take_the_master_from_rank_0s_hostname_i(catalog):
    """DeepSpeed's openmpi mode: rank 0's `hostname -I`, port 29500, whatever --master-addr
    and --master-port said (comm.py mpi_discovery)."""
    rule = catalog.launcher("deepspeed-openmpi")
    facts = {"hostname_i": {"rc": 0, "stdout": "10.0.0.10 172.17.0.1 \n", "error": None}}
    addr, port, said, why = master_choice(
        rule, first="node0", first_facts=facts, master_addr="node9",
        master_from="--master-addr", port=29600, port_from="--master-port", environ={},
        exported={})
    assert (addr, port, why) == ("10.0.0.10", 29500, None)
    assert "29600 given here does not reach them" in said
