"""What each launcher envgen knows will do on the other nodes, from its [[launcher]] record in
matrix/curated/preflight.toml (read from the launcher's own code or manual, cited there): the
variables every rank gets (names and values, each with where it comes from), the master address
and port the ranks will use, the environment they run in, and what they need on every node.

- :func:`launcher_view`: the exports of a launch of this shell with one launcher —
  DeepSpeed's prefixes and .deepspeed_env lines (``forwards = "deepspeed"``, launcher_view.py),
  the caller's environment (``"all"``: srun's --export=ALL; only the variables that bear on a
  rank's start and network are shown and exported to the preflight's own programs, so no token
  of this shell lands on a command line), the variables named to it (``"listed"``: mpirun -x and
  OMPI_*), nothing (``"none"``: torchrun, started on each node), plus what the launcher sets.
- :func:`master_choice`: the address and port the ranks will rendezvous at, and why.
- :func:`needs_findings`, :func:`interface_findings`: a module the ranks import that a node
  lacks (mpi4py), an interface the launcher pins its transport to that a node lacks (eth0).

Input: the catalog, the rule, this shell's variables and folder. Output: a
:class:`~envgen.preflight.launcher_view.LauncherView` and findings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from envgen.doctor.findings import Finding
from envgen.preflight.catalog import LauncherRule
from envgen.preflight.launcher_view import LauncherView, deepspeed_view, master_from

__all__ = ["RELEVANT", "interface_findings", "launch_port", "launcher_view", "master_choice",
           "needs_findings", "version_notes", "with_master"]

# what of a caller's whole environment (srun --export=ALL) bears on a rank's start and network:
# shown, and exported to the preflight's programs; the rest travels with srun but is not shown
RELEVANT = re.compile(r"^(NCCL_|GLOO_|TORCH_|TP_SOCKET_IFNAME$|PYTHON|OMP_|MKL_|CUDA_|UCX_|"
                      r"MASTER_ADDR$|MASTER_PORT$|PATH$|LD_LIBRARY_PATH$|LD_PRELOAD$|"
                      r"DS_ENV_FILE$|FI_|MV2_|OMPI_MCA_)")


def launcher_view(catalog, rule: LauncherRule, environ: Mapping[str, str], *, cwd: Path,
                  home: Path, listed: Mapping[str, str | None] | None = None,
                  several: bool = False) -> LauncherView:
    """The variables ``rule``'s launcher gives every rank of a launch from this shell (names and
    values, with their origins); ``listed``: the variables named to the launcher (mpirun -x
    NAME[=VALUE], srun --export=NAME[=VALUE]); ``several``: more than one rank a node."""
    listed = dict(listed or {})
    exports: dict[str, str] = {}
    origins: dict[str, str] = {}
    files: tuple = ()
    lines: tuple = ()
    notes: list[str] = []
    added = dict(rule.adds)
    if several and rule.adds_when_several:
        added.update(rule.adds_when_several)
    for k, v in added.items():  # first: what the shell and the files give wins (add_export)
        if rule.adds_unless_set and k in environ and rule.forwards != "none":
            continue
        exports[k], origins[k] = v, f"{rule.id} sets it" + (
            " unless it is set where it starts" if rule.adds_unless_set else "")
    if rule.forwards in ("deepspeed", "all+deepspeed"):
        ds = deepspeed_view(catalog, environ, cwd=cwd, home=home)
        exports.update(ds.exports)
        origins.update(ds.origins)
        files, lines = ds.files, ds.lines
    if rule.forwards in ("all", "all+deepspeed"):
        for k in sorted(environ):
            if RELEVANT.match(k):
                exports[k], origins[k] = environ[k], "this shell (the caller's whole " \
                    "environment goes to every rank)"
        others = sum(1 for k in environ if not RELEVANT.match(k))
        notes.append(f"{others} more variables of this shell go to every rank too (not shown)")
    for k, v in listed.items():
        if v is None and k not in environ:
            notes.append(f"{k} is named to the launcher but not set in this shell: not passed")
            continue
        if rule.forwards in ("all", "all+deepspeed") and k in environ:
            continue  # srun --export=ALL,K=V: the caller's value takes precedence
        exports[k] = environ[k] if v is None else v
        origins[k] = "named to the launcher (--export)"
    if rule.forwards == "listed":
        for k in sorted(environ):
            if k.startswith(rule.listed_prefixes) and k not in exports:
                exports[k], origins[k] = environ[k], f"this shell ({rule.id} passes " \
                    f"{', '.join(p + '*' for p in rule.listed_prefixes)} by itself)"
    session = ("each node's non-interactive SSH session (no login shell)"
               if rule.session == "ssh" else "the caller's environment, PATH included")
    return LauncherView(rule.name, exports, origins, files, lines, id=rule.id,
                        session=session, rank_vars=rule.rank_vars, notes=tuple(notes),
                        interpreter=rule.interpreter or None)


def launch_port(rule: LauncherRule, *, port: int, port_from: str,
                environ: Mapping[str, str]) -> tuple[int, str]:
    """(the port the ranks rendezvous at, how) for ``rule``'s launcher, given the job's
    ``port`` and where it came from (--master-port, MASTER_PORT, default)."""
    if rule.fixed_port is not None:
        said = f"port {rule.fixed_port}, fixed by the ranks' own discovery"
        if port != rule.fixed_port and port_from != "default":
            said += f" (the {port} given here does not reach them)"
        return rule.fixed_port, said
    endpoint = _static_endpoint(rule, environ)
    if endpoint is not None:
        return endpoint[1], f"port {endpoint[1]} (PET_RDZV_ENDPOINT)"
    if rule.master == "option" and port_from != "--master-port":
        pet = environ.get("PET_MASTER_PORT", "")
        if pet.isdigit():
            return int(pet), f"port {pet} (PET_MASTER_PORT)"
        return 29500, "port 29500 (torchrun's default" + (
            f"; MASTER_PORT={port} in this shell is not read by torchrun)"
            if port_from == "MASTER_PORT" else ")")
    return port, f"port {port} ({port_from})"


def master_choice(rule: LauncherRule, *, first: str, first_facts: dict | None,
                  master_addr: str, master_from: str, port: int, port_from: str,
                  environ: Mapping[str, str], exported: Mapping[str, str]
                  ) -> tuple[str | None, int, str, str | None]:
    """(the master address the ranks will use — None when it cannot be known —, its port, how
    it was picked, why that cannot work or None) for ``rule``'s launcher. ``master_addr`` /
    ``master_from``: the job's (--master-addr, MASTER_ADDR, the first node); ``port_from``:
    where the job's port came from (--master-port, MASTER_PORT, default)."""
    port, said_port = launch_port(rule, port=port, port_from=port_from, environ=environ)
    if rule.master in ("hostname-i", "rank0-hostname-i") and (
            rule.master == "rank0-hostname-i" or master_from == "first node"):
        addr, said = master_from_facts(first_facts)
        who = "the first host" if rule.master == "hostname-i" else "rank 0's node, the first host"
        how = f"the first word of `hostname -I` on {first} ({who}), as {rule.name} picks it"
        if addr is None:
            return None, port, f"{how}: {said}", said
        return addr, port, f"{how}: {said}; {said_port}", None
    if rule.master == "hostname-i":  # given: the runner passes --master_addr to every node
        return master_addr, port, f"{master_from}; {said_port}", None
    if rule.master == "option":
        endpoint = _static_endpoint(rule, environ)
        if endpoint is not None:  # get_rdzv_endpoint: an endpoint given wins over the master
            return endpoint[0], port, (f"PET_RDZV_ENDPOINT={environ['PET_RDZV_ENDPOINT']} "
                                       f"(static rendezvous); {said_port}"), None
        pet_addr = environ.get("PET_MASTER_ADDR")
        backend = environ.get("PET_RDZV_BACKEND", "static")
        if backend != "static":  # the workers get the rank-0 node's FQDN and a free port
            return master_addr, port, (f"PET_RDZV_BACKEND={backend}: the workers' MASTER_ADDR "
                                       "is the FQDN of the node that gets rank 0 and their port "
                                       "a free one (not modelled: the check used "
                                       f"{master_addr}:{port})"), None
        if master_from == "--master-addr":
            return master_addr, port, f"--master-addr {master_addr}; {said_port}", None
        if pet_addr:
            return pet_addr, port, f"PET_MASTER_ADDR={pet_addr}; {said_port}", None
        default = rule.default_master_addr or "127.0.0.1"
        why = ("no --master-addr" + (f"; MASTER_ADDR={master_addr} in this shell is not read "
                                     "by torchrun" if master_from == "MASTER_ADDR" else ""))
        return default, port, f"torchrun's default {default}: {why}; {said_port}", why
    if "MASTER_ADDR" in exported:  # first-node: the launcher passes the caller's
        return exported["MASTER_ADDR"], port, (f"MASTER_ADDR={exported['MASTER_ADDR']}, "
                                               f"passed by the launcher; {said_port}"), None
    how = ("the first host" if master_from == "first node" else master_from)
    return master_addr, port, (f"{how}: {rule.id} sets no MASTER_ADDR, the job's script takes "
                               f"it (the first host by convention); {said_port}"), None


def _static_endpoint(rule: LauncherRule, environ: Mapping[str, str]) -> tuple[str, int] | None:
    """torchrun's rendezvous endpoint from PET_RDZV_ENDPOINT under the static backend (its
    default; PET_RDZV_BACKEND): (host, port) as parse_rendezvous_endpoint splits it at the last
    ':' ([...] for IPv6); None when none is set, the backend is another or it has no port."""
    if rule.master != "option" or environ.get("PET_RDZV_BACKEND", "static") != "static":
        return None
    text = environ.get("PET_RDZV_ENDPOINT", "").strip()
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    return host.strip("[]"), int(port)


def master_from_facts(facts: dict | None) -> tuple[str | None, str]:
    return master_from((facts or {}).get("hostname_i"))


def with_master(view: LauncherView, addr: str | None, said: str, port: int) -> LauncherView:
    return replace(view, master_addr=addr, master_from=said, master_port=port)


def version_notes(rule: LauncherRule, snaps: Mapping[str, Any]) -> tuple[str, ...]:
    """A note when nodes have another version of the package whose code ``rule`` was read in
    (its release, without a local label such as +cpu), naming them."""
    if rule.read_in is None:
        return ()
    package, version = rule.read_in
    other: dict[str, list[str]] = {}
    for node, snap in sorted(snaps.items()):
        packages = getattr(snap, "packages", None)
        have = (packages or {}).get(package) if isinstance(packages, dict) else None
        if package == "torch" and isinstance(getattr(snap, "torch", None), str):
            have = snap.torch
        if isinstance(have, str) and have.split("+", 1)[0] != version:
            other.setdefault(have, []).append(node)
    return tuple(f"what {rule.id} does was read in {package} {version}'s code; "
                 f"{', '.join(nodes)} {'has' if len(nodes) == 1 else 'have'} {have}, whose "
                 "launcher may differ" for have, nodes in other.items())


def needs_findings(catalog, rule: LauncherRule, snaps: Mapping[str, Any]) -> list[Finding]:
    """launcher-needs: a module ``rule``'s ranks import that a node's environment lacks."""
    out = []
    for module in rule.needs:
        missing = sorted(n for n, s in snaps.items()
                         if isinstance(getattr(s, "packages", None), dict)
                         and _norm(module) not in {_norm(p) for p in s.packages})
        if missing:
            out.append(catalog.finding(
                "launcher-needs",
                f"{rule.name} starts ranks that import {module}, which is not installed on "
                f"{', '.join(missing)}: they stop with \"ModuleNotFoundError: No module named "
                f"'{module}'\" before any rendezvous",
                {"module": module, "nodes": missing, "launcher": rule.id}, None, None))
    return out


def interface_findings(catalog, rule: LauncherRule, facts: Mapping[str, dict]) -> list[Finding]:
    """launcher-interface: a node without the interface ``rule``'s launcher pins its own
    transport to."""
    from envgen.preflight.checks_network import interfaces

    out = []
    for name in rule.interfaces:
        lacking = sorted(n for n, doc in facts.items() if name not in interfaces(doc))
        if lacking:
            have = sorted({i for n in lacking for i in interfaces(facts[n]) if i != "lo"})
            out.append(catalog.finding(
                "launcher-interface",
                f"{rule.name} restricts MPI's TCP transport to {name}, which "
                f"{', '.join(lacking)} {'has' if len(lacking) == 1 else 'have'} not (there: "
                f"{', '.join(have) or 'no interface'})",
                {"interface": name, "nodes": lacking, "have": have, "launcher": rule.id},
                None, None))
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
