"""A real multi-node cluster on one machine, for tests/preflight/test_preflight_cluster.py.

- :func:`images` (tmp folder) -> {target: tag}: builds the `env` stage of
  tests/support/broken_envs/cpu/Dockerfile as envgen-test/cpu-env:1 (layers shared with the
  broken-environment tests), then this folder's Dockerfile targets `node` and `node-other-torch`
  on it.
- :class:`Cluster` (n, images, shm, cap_net_admin): a user-defined Docker network and n
  containers named node0..node{n-1} (their hostnames and DNS names on that network) running sshd;
  node0 holds a client key every node authorizes and every node's host key in known_hosts, as
  on a cluster whose login node launches the job. A context manager that removes them.
  :meth:`Cluster.sh` runs a shell script on a node; :meth:`Cluster.preflight` runs
  ``envgen preflight --json`` on node0 and returns (exit code, the JSON document, stderr).
- Faults, each undoable: :meth:`Cluster.remove_key`, :meth:`Cluster.block_port` (iptables DROP),
  :meth:`Cluster.take_port` (a process listening), :meth:`Cluster.pause` / ``unpause``.

Only the standard library and pytest (through tests/support/broken_envs/common.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

from support.broken_envs import common

HERE = Path(__file__).resolve().parent
DOCKER = common.DOCKER
ENV_IMAGE = "envgen-test/cpu-env:1"
IMAGES = {"node": "envgen-test/node:1", "node-other-torch": "envgen-test/node-other-torch:1"}
# another torch release than the CPU build, for the node that differs: PyPI's wheel (CUDA build)
OTHER_TORCH = os.environ.get("ENVGEN_TEST_OTHER_TORCH",
                             "/opt/pypi-more/files/torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl")


def images(tmp: Path) -> dict[str, str]:
    """Build the node images (cached layers: seconds when nothing changed); their tags by
    target (node-other-torch only when its wheel, OTHER_TORCH, is there)."""
    base = common.docker_base()
    wheel = common.cpu_torch_wheel()
    env_ctx = common.make_context(tmp / "env-context",
                                  common.REPO / "tests/support/broken_envs/cpu/Dockerfile",
                                  {f"cpu-wheels/{wheel.name}": wheel})
    with common.step("image cpu-env", prefix="cluster"):
        common.build(env_ctx, "env", ENV_IMAGE, base)
    other = Path(OTHER_TORCH)
    extra = {f"other-torch/{other.name}": other} if other.is_file() else {}
    ctx = common.make_context(tmp / "node-context", HERE / "Dockerfile", extra)
    (ctx / "other-torch").mkdir(exist_ok=True)
    built = {}
    for target, tag in IMAGES.items():
        if target == "node-other-torch" and not extra:
            continue  # the test that needs it says why it cannot run
        with common.step(f"image {target}", prefix="cluster"):
            common.build(ctx, target, tag, ENV_IMAGE)
        built[target] = tag
    return built


def _docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode:  # say what Docker said (CalledProcessError shows no stderr)
        raise RuntimeError(f"docker {' '.join(args)}: exit {proc.returncode}: "
                           f"{(proc.stderr or proc.stdout).strip()[-2000:]}")
    return proc


class Cluster:
    """n nodes on a network of their own; ``images`` maps a node name to another image than
    ``image``, ``shm`` a node name to its /dev/shm size (Docker's --shm-size; 1g, the size the
    preflight asks for, where not given)."""

    def __init__(self, n: int = 3, image: str = IMAGES["node"], *,
                 images: dict[str, str] | None = None, shm: dict[str, str] | None = None,
                 cap_net_admin: bool = False):
        self.id = uuid.uuid4().hex[:8]
        self.network = f"envgen-cluster-{self.id}"
        self.nodes = [f"node{i}" for i in range(n)]
        self.containers: dict[str, str] = {}
        self.holders: dict[tuple[str, int], str] = {}  # (node, port) → the pid listening there
        _docker("network", "create", self.network)
        try:
            for node in self.nodes:
                args = ["run", "-d", "--name", f"envgen-{self.id}-{node}", "--hostname", node,
                        "--network", self.network, "--network-alias", node]
                args += ["--shm-size", (shm or {}).get(node, "1g")]
                if cap_net_admin:
                    args += ["--cap-add", "NET_ADMIN"]
                _docker(*args, (images or {}).get(node, image))
                self.containers[node] = f"envgen-{self.id}-{node}"
            self._trust()
        except BaseException:
            self.close()
            raise

    def _trust(self) -> None:
        """node0's client key in every node's authorized_keys; every node's host key in node0's
        known_hosts (ssh-keyscan once each sshd answers)."""
        self.sh("node0", "ssh-keygen -q -t ed25519 -N '' -f /root/.ssh/id_ed25519", check=True)
        pub = self.sh("node0", "cat /root/.ssh/id_ed25519.pub", check=True)[1].strip()
        for node in self.nodes:
            self.sh(node, f"printf '%s\\n' '{pub}' > /root/.ssh/authorized_keys && "
                    "chmod 600 /root/.ssh/authorized_keys", check=True)
        deadline = time.monotonic() + 60
        script = f"ssh-keyscan -T 5 {' '.join(self.nodes)} 2>/dev/null"
        while True:
            _, out = self.sh("node0", script)
            if all(f"{node} ssh-ed25519" in out for node in self.nodes):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"sshd did not answer on every node within 60 s:\n{out}")
            time.sleep(0.5)
        self.write("node0", "/root/.ssh/known_hosts", out)

    def sh(self, node: str, script: str, *, timeout: float = 300,
           check: bool = False) -> tuple[int, str]:
        """``sh -c SCRIPT`` on ``node``: (exit code, stdout and stderr interleaved)."""
        proc = subprocess.run([DOCKER, "exec", self.containers[node], "sh", "-c", script],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{node}: `{script}` exited {proc.returncode}:\n{proc.stdout}")
        return proc.returncode, proc.stdout

    def write(self, node: str, path: str, text: str) -> None:
        """Write ``text`` to ``path`` on ``node``."""
        subprocess.run([DOCKER, "exec", "-i", self.containers[node], "sh", "-c",
                        f"cat > '{path}'"], input=text, text=True, check=True, timeout=60,
                       capture_output=True)

    def preflight(self, *args: str, env: dict[str, str] | None = None,
                  timeout: float = 600) -> tuple[int, dict | None, str]:
        """``envgen preflight --json ARGS`` on node0 (the launching node): (exit code, the JSON
        document or None, stderr)."""
        cmd = [DOCKER, "exec"]
        for key, value in (env or {}).items():
            cmd += ["-e", f"{key}={value}"]
        proc = subprocess.run([*cmd, self.containers["node0"], "envgen", "preflight", "--json",
                               *args], capture_output=True, text=True, timeout=timeout,
                              check=False)
        try:
            doc = json.loads(proc.stdout)
        except ValueError:
            doc = None
        return proc.returncode, doc, proc.stderr

    def start_preflight(self, *args: str) -> subprocess.Popen:
        """The same, started: its stderr (progress lines) can be read while it runs."""
        return subprocess.Popen([DOCKER, "exec", self.containers["node0"], "envgen", "preflight",
                                 "--json", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    # ---- faults ------------------------------------------------------------------------------
    def remove_key(self, node: str) -> None:
        """``node`` no longer authorizes node0's key."""
        self.sh(node, "rm -f /root/.ssh/authorized_keys", check=True)

    def block_port(self, node: str, port: int) -> None:
        """A firewall on ``node`` drops incoming TCP to ``port`` (needs cap_net_admin)."""
        self.sh(node, f"iptables -I INPUT -p tcp --dport {port} -j DROP", check=True)

    def unblock_port(self, node: str, port: int) -> None:
        self.sh(node, f"iptables -D INPUT -p tcp --dport {port} -j DROP", check=True)

    def take_port(self, node: str, port: int) -> None:
        """Another program listens on ``port`` on ``node`` (until :meth:`free_port`)."""
        program = ("import socket,time; s=socket.socket(); "
                   "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
                   f"s.bind(('0.0.0.0', {port})); s.listen(); time.sleep(3600)")
        _, out = self.sh(node, f'python3 -c "{program}" >/dev/null 2>&1 & echo $!', check=True)
        self.holders[(node, port)] = out.strip()
        deadline = time.monotonic() + 30
        while self.sh(node, f"ss -Hltn 'sport = :{port}' | grep -q LISTEN")[0] != 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on {node}:{port} after 30 s")
            time.sleep(0.2)

    def free_port(self, node: str, port: int) -> None:
        self.sh(node, f"kill {self.holders.pop((node, port))}", check=True)

    def pause(self, node: str, attempts: int = 5) -> None:
        """Freeze every process of ``node``: it stops answering, its connections stay open.
        runc gives up freezing a cgroup whose processes are busy starting ("unable to
        freeze") and leaves retrying to its caller (opencontainers/runc#4388); so do we."""
        for attempt in range(attempts):
            proc = _docker("pause", self.containers[node], check=False)
            if proc.returncode == 0:
                return
            if "unable to freeze" not in proc.stderr or attempt == attempts - 1:
                raise RuntimeError(f"docker pause {node}: {proc.stderr.strip()}")
            _docker("unpause", self.containers[node], check=False)  # a late freeze undone
            time.sleep(0.5)

    def unpause(self, node: str) -> None:
        _docker("unpause", self.containers[node], check=False)

    def close(self) -> None:
        for name in self.containers.values():
            _docker("unpause", name, check=False)
            _docker("rm", "-f", name, check=False)
        _docker("network", "rm", self.network, check=False)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
