"""matrix/curated/preflight.toml as typed values: the finding kinds preflight reports (severity,
fix pattern, the real error text each prevents, the citation), the thresholds and defaults it
compares nodes against, and the patterns that turn ssh's stderr into a finding.

Input: a matrix folder (its ``curated/preflight.toml``, checked against
``envgen/schemas/curated-preflight.schema.json``, its fix patterns against
``curated/doctor.toml`` when that file is there). Output: a frozen :class:`Catalog`, cached per
folder; a malformed file raises :class:`envgen.errors.DataError` naming the file and the field.
:meth:`Catalog.finding` builds an :class:`envgen.doctor.findings.Finding` whose severity,
source and pattern come from the kind, so the rules only say what they saw and what to do.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envgen.doctor.findings import Finding
from envgen.errors import DataError, UsageError
from envgen.schemas.check import check, where
from envgen.userfile import read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["FILE", "Catalog", "IfnameRules", "Kind", "LauncherRule", "SshError", "load_catalog"]

FILE = "curated/preflight.toml"
SEVERITIES = ("error", "warning", "info")
SSH_FALLBACK = "ssh-failed"  # the kind of ssh stderr that no [[ssh_error]] regex matches


@dataclass(frozen=True)
class Kind:
    id: str
    severity: str
    title: str
    source: str
    pattern: str | None = None
    symptom: str | None = None
    note: str | None = None
    fix: str | None = None


@dataclass(frozen=True)
class SshError:
    regex: re.Pattern[str]
    kind: str
    sample: str
    source: str


@dataclass(frozen=True)
class LauncherRule:
    """One [[launcher]]: what a launcher does on the other nodes (the file's header says what
    each field means)."""

    id: str
    name: str
    forwards: str  # deepspeed | all | all+deepspeed | listed | none
    master: str  # hostname-i | rank0-hostname-i | option | first-node
    session: str  # ssh | caller
    how_to_forward: str
    source: str
    adds: dict[str, str] = field(default_factory=dict)
    adds_unless_set: bool = False
    adds_when_several: dict[str, str] = field(default_factory=dict)  # more than one rank a node
    listed_prefixes: tuple[str, ...] = ()
    master_reads: tuple[str, ...] = ()
    default_master_addr: str | None = None
    fixed_port: int | None = None
    interfaces: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    rank_vars: tuple[str, ...] = ()
    interpreter: str = ""  # the Python or program the ranks start with
    read_in: tuple[str, str] | None = None  # (package, version) whose code the record was read in
    note: str = ""


@dataclass(frozen=True)
class IfnameRules:
    """How NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME / TP_SOCKET_IFNAME name interfaces."""

    nccl_var: str
    nccl_separator: str
    nccl_exclude_prefix: str
    nccl_exact_prefix: str
    nccl_min_length: int
    nccl_auto_order: tuple[str, ...]
    gloo_var: str
    gloo_separator: str
    tp_var: str

    def nccl_selects(self, value: str, interfaces: Iterable[str]) -> tuple[str, ...] | None:
        """The names in ``interfaces`` that NCCL_SOCKET_IFNAME=``value`` selects, in their
        order; ``None`` when NCCL ignores the value (shorter than ``nccl_min_length``) and picks
        automatically. ``^`` (first) excludes, ``=`` (after it) matches whole names, otherwise
        each comma-separated entry is a prefix; ``:port`` suffixes are dropped. Whether an
        interface is up is the caller's business (NCCL only considers running ones)."""
        if len(value) < self.nccl_min_length:
            return None
        exclude = value.startswith(self.nccl_exclude_prefix)
        if exclude:
            value = value[len(self.nccl_exclude_prefix):]
        exact = value.startswith(self.nccl_exact_prefix)
        if exact:
            value = value[len(self.nccl_exact_prefix):]
        tokens = [t.split(":", 1)[0] for t in value.split(self.nccl_separator)]
        tokens = [t for t in tokens if t]

        def hit(name: str) -> bool:
            if not tokens:  # NCCL: an empty list matches everything
                return True
            return any(name == t if exact else name.startswith(t) for t in tokens)

        return tuple(n for n in interfaces if hit(n) != exclude)

    def gloo_names(self, value: str) -> tuple[str, ...]:
        """The interface names GLOO_SOCKET_IFNAME=``value`` lists (each must exist exactly)."""
        return tuple(t.strip() for t in value.split(self.gloo_separator) if t.strip())


@dataclass(frozen=True)
class Catalog:
    kinds: dict[str, Kind]
    shm_min_bytes: int
    shm_docker_default_bytes: int | None
    shm_fix: str
    shm_fix_alt: str | None
    shm_kubernetes_fix: str
    memlock_required: str
    memlock_fix: str
    memlock_limits_conf: tuple[str, ...]
    memlock_docker_fix: str
    default_port: int
    nccl_port_range_sysctl: str | None
    ifname: IfnameRules
    nccl_settings: dict[str, str]  # variable (or an older alias) → what it does
    deepspeed_export_prefixes: tuple[str, ...]
    deepspeed_env_file: str
    deepspeed_env_file_var: str | None
    deepspeed_env_file_dirs: tuple[str, ...]
    deepspeed_default_launcher: str
    deepspeed_default_hostfile: str | None
    deepspeed_hostfile_regex: re.Pattern[str] | None
    deepspeed_ssh_check: str | None
    deepspeed_master_addr_command: str | None
    ssh_errors: tuple[tuple[re.Pattern[str], str], ...]
    hosts_debian_address: str
    hosts_loopback_network: ipaddress.IPv4Network | ipaddress.IPv6Network
    hosts_fix: str
    sources: dict[str, str]  # section ("shm", "memlock", "ifname.nccl", ...) → its citation
    raw: dict[str, Any] = field(repr=False, default_factory=dict)
    launchers: dict[str, LauncherRule] = field(default_factory=dict)  # [[launcher]] by id

    def launcher(self, launcher_id: str) -> LauncherRule:
        try:
            return self.launchers[launcher_id]
        except KeyError:
            raise DataError(f"{FILE} has no [[launcher]] {launcher_id!r}",
                            hint=f"add it to {FILE} or choose one of "
                            f"{', '.join(self.launchers) or '(none)'}") from None

    def kind(self, kind_id: str) -> Kind:
        try:
            return self.kinds[kind_id]
        except KeyError:
            raise DataError(f"{FILE} has no [[kind]] {kind_id!r}",
                            hint=f"add it (id, severity, title, source) to {FILE}") from None

    def finding(self, kind_id: str, summary: str, evidence: Mapping[str, Any],
                fix: str | None, command: str | None = None, *,
                severity: str | None = None) -> Finding:
        """A finding of kind ``kind_id``: severity, source and pattern from the catalog; ``fix``
        falls back to the kind's own fix words when ``None``; ``severity`` overrides the kind's
        where one case of a kind is milder or graver than its usual one."""
        k = self.kind(kind_id)
        return Finding(kind=k.id, severity=severity or k.severity, summary=summary,
                       evidence=dict(evidence),
                       fix=fix if fix is not None else (k.fix or ""), command=command,
                       source=k.source, pattern=k.pattern)

    def classify_ssh(self, stderr: str) -> str | None:
        """The kind the first matching [[ssh_error]] regex gives ssh's ``stderr``; ``None`` when
        none matches (the caller reports ``ssh-failed`` if ssh failed)."""
        for regex, kind in self.ssh_errors:
            if regex.search(stderr):
                return kind
        return None

    def deepspeed_forwards(self, variable: str) -> bool:
        """Whether DeepSpeed's multi-node runner exports ``variable`` to the other nodes by
        itself (its name starts with one of the exported prefixes)."""
        return variable.startswith(self.deepspeed_export_prefixes)

    def is_loopback(self, address: str) -> bool:
        """Whether ``address`` lies in the hosts trap's loopback network (127.0.1.1 does)."""
        try:
            return ipaddress.ip_address(address) in self.hosts_loopback_network
        except ValueError:
            return False


def _at(doc: dict, path: tuple) -> str:
    """``curated/preflight.toml kind[3].severity (ssh-host-key)``: where a schema error is, with
    the id (or name, or kind) of the record it is in."""
    if not path:
        return FILE
    rows = doc.get(path[0])
    rec = (rows[path[1]] if len(path) > 1 and isinstance(path[1], int)
           and isinstance(rows, list) and path[1] < len(rows) else None)
    name = None
    if isinstance(rec, dict):
        name = rec.get("id", rec.get("name", rec.get("kind")))
    plain = isinstance(name, str) and 0 < len(name) <= 40 and name.isprintable()
    return f"{FILE} {where(path)}" + (f" ({name})" if plain else "")


def _compile(path: Path, value: str, field_name: str) -> re.Pattern[str]:
    try:
        return re.compile(value)
    except re.error as exc:
        raise DataError(f"{path}: {field_name} {value!r} is not a regular expression: {exc}",
                        hint=f"fix {field_name} in {FILE}") from None


def _doctor_patterns(matrix_dir: Path) -> set[str] | None:
    """The fix-pattern ids of curated/doctor.toml, or None when the file is not there."""
    if not (Path(matrix_dir) / "curated" / "doctor.toml").is_file():
        return None
    from envgen.doctor.catalog import load_catalog as load_doctor

    return set(load_doctor(Path(matrix_dir)).patterns)


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = tomllib.loads(read_text(path, "matrix"))
    except FileNotFoundError:
        raise DataError(f"{path} is missing", hint="restore it from envgen's matrix/ "
                        "(`git checkout matrix/curated/preflight.toml`)") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, UsageError) as exc:
        raise DataError(f"{path} cannot be read: {exc}", hint="fix its TOML syntax") from None
    errors = check(doc, "curated-preflight")
    if errors:
        shown = "\n  ".join(f"{_at(doc, e.path)}: {e.message()}" for e in errors[:5])
        more = f"\n  … and {len(errors) - 5} more" if len(errors) > 5 else ""
        raise DataError(f"{path} has {len(errors)} problem(s):\n  {shown}{more}",
                        hint=f"fix {FILE} (its header comment documents the fields; the schema "
                        "is envgen/schemas/curated-preflight.schema.json)")
    return doc


def _kinds(path: Path, doc: dict, patterns: set[str] | None) -> dict[str, Kind]:
    kinds: dict[str, Kind] = {}
    for i, k in enumerate(doc["kind"]):
        if k["id"] in kinds:
            raise DataError(f"{path}: kind[{i}] repeats id {k['id']!r}",
                            hint="every [[kind]] id must be unique")
        if patterns is not None and k.get("pattern") and k["pattern"] not in patterns:
            raise DataError(f"{path}: kind {k['id']} names pattern {k['pattern']!r}, which "
                            "curated/doctor.toml's [[pattern]] does not define",
                            hint="use a pattern id of curated/doctor.toml or add it there")
        kinds[k["id"]] = Kind(id=k["id"], severity=k["severity"], title=k["title"],
                              source=k["source"], pattern=k.get("pattern"),
                              symptom=k.get("symptom"), note=k.get("note"), fix=k.get("fix"))
    return kinds


def _ssh_errors(path: Path, doc: dict, kinds: dict[str, Kind]) -> tuple[SshError, ...]:
    rows = []
    for i, row in enumerate(doc["ssh_error"]):
        if row["kind"] not in kinds:
            raise DataError(f"{path}: ssh_error[{i}].kind {row['kind']!r} is not a [[kind]] id",
                            hint="use the id of a [[kind]] in the same file")
        rows.append(SshError(regex=_compile(path, row["regex"], f"ssh_error[{i}].regex"),
                             kind=row["kind"], sample=row["sample"], source=row["source"]))
    for i, row in enumerate(rows):  # each sample is classified as its own record says
        got = next((r.kind for r in rows if r.regex.search(row.sample)), None)
        if got != row.kind:
            raise DataError(f"{path}: ssh_error[{i}].sample {row.sample!r} is classified as "
                            f"{got!r}, not {row.kind!r}",
                            hint="fix the regex, the sample, or the order of [[ssh_error]]")
    if SSH_FALLBACK not in kinds:
        raise DataError(f"{path} has no [[kind]] {SSH_FALLBACK!r}",
                        hint="unmatched ssh errors are reported as that kind; add it")
    return tuple(rows)


def _nccl_settings(path: Path, doc: dict) -> dict[str, str]:
    out: dict[str, str] = {}
    for i, row in enumerate(doc["nccl_setting"]):
        for name in (row["name"], *row.get("aliases", ())):
            if name in out:
                raise DataError(f"{path}: nccl_setting[{i}] repeats variable {name!r}",
                                hint="list every variable (or alias) once")
            out[name] = row["what"] if name == row["name"] else (
                f"{row['what']} (older name of {row['name']})")
    return out


def _launchers(path: Path, doc: dict) -> dict[str, LauncherRule]:
    out: dict[str, LauncherRule] = {}
    for i, row in enumerate(doc.get("launcher", ())):
        if row["id"] in out:
            raise DataError(f"{path}: launcher[{i}] repeats id {row['id']!r}",
                            hint="every [[launcher]] id must be unique")
        tuples = {k: tuple(row.get(k, ())) for k in ("listed_prefixes", "master_reads",
                                                      "interfaces", "needs", "rank_vars")}
        out[row["id"]] = LauncherRule(
            id=row["id"], name=row["name"], forwards=row["forwards"], master=row["master"],
            session=row["session"], how_to_forward=row["how_to_forward"], source=row["source"],
            adds=dict(row.get("adds", {})), adds_unless_set=row.get("adds_unless_set", False),
            adds_when_several=dict(row.get("adds_when_several", {})),
            default_master_addr=row.get("default_master_addr"),
            fixed_port=row.get("fixed_port"), note=row.get("note", ""),
            interpreter=row.get("interpreter", ""),
            read_in=(row["read_in"]["package"], row["read_in"]["version"])
            if "read_in" in row else None, **tuples)
    return out


def _loopback(path: Path, trap: dict) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        network = ipaddress.ip_network(trap["loopback_network"])
        address = ipaddress.ip_address(trap["debian_address"])
    except ValueError as exc:
        raise DataError(f"{path}: hosts_trap: {exc}",
                        hint="loopback_network is a network (127.0.0.0/8), debian_address an "
                        "address in it") from None
    if address not in network:
        raise DataError(f"{path}: hosts_trap.debian_address {str(address)!r} is not in "
                        f"loopback_network {str(network)!r}", hint="fix one of the two")
    return network


@functools.lru_cache(maxsize=8)
def load_catalog(matrix_dir: Path) -> Catalog:
    """Preflight's data in ``matrix_dir``; a DataError naming the file and the field when it is
    missing or malformed."""
    path = Path(matrix_dir) / FILE
    doc = _read(path)
    kinds = _kinds(path, doc, _doctor_patterns(Path(matrix_dir)))
    ssh = _ssh_errors(path, doc, kinds)
    shm, mem, ports, ifn = doc["shm"], doc["memlock"], doc["ports"], doc["ifname"]
    ds, trap = doc["deepspeed_runner"], doc["hosts_trap"]
    ds_regex = ds.get("hostfile_regex")
    return Catalog(
        kinds=kinds,
        shm_min_bytes=shm["min_bytes"], shm_docker_default_bytes=shm.get("docker_default_bytes"),
        shm_fix=shm["docker_fix"], shm_fix_alt=shm.get("docker_fix_alt"),
        shm_kubernetes_fix=shm["kubernetes_fix"],
        memlock_required=mem["required"], memlock_fix=mem["shell_fix"],
        memlock_limits_conf=tuple(mem["limits_conf"]), memlock_docker_fix=mem["docker_fix"],
        default_port=ports["default_master_port"],
        nccl_port_range_sysctl=ports.get("nccl_port_range_sysctl"),
        ifname=IfnameRules(
            nccl_var=ifn["nccl_var"], nccl_separator=ifn["nccl_separator"],
            nccl_exclude_prefix=ifn["nccl_exclude_prefix"],
            nccl_exact_prefix=ifn["nccl_exact_prefix"],
            nccl_min_length=ifn.get("nccl_min_length", 1),
            nccl_auto_order=tuple(ifn.get("nccl_auto_order", ())),
            gloo_var=ifn["gloo_var"], gloo_separator=ifn["gloo_separator"],
            tp_var=ifn["tp_var"]),
        nccl_settings=_nccl_settings(path, doc),
        deepspeed_export_prefixes=tuple(dict.fromkeys(
            [*ds["export_prefixes"], *ds.get("accelerator_prefixes", ()),
             *ds.get("nebula_exports", ())])),
        deepspeed_env_file=ds["env_file"], deepspeed_env_file_var=ds.get("env_file_var"),
        deepspeed_env_file_dirs=tuple(ds.get("env_file_dirs", ())),
        deepspeed_default_launcher=ds["default_launcher"],
        deepspeed_default_hostfile=ds.get("default_hostfile"),
        deepspeed_hostfile_regex=(_compile(path, ds_regex, "deepspeed_runner.hostfile_regex")
                                  if ds_regex else None),
        deepspeed_ssh_check=ds.get("ssh_check"),
        deepspeed_master_addr_command=ds.get("master_addr_command"),
        ssh_errors=tuple((r.regex, r.kind) for r in ssh),
        hosts_debian_address=trap["debian_address"],
        hosts_loopback_network=_loopback(path, trap), hosts_fix=trap["fix"],
        sources={"shm": shm["source"], "memlock": mem["source"], "ports": ports["source"],
                 "ifname.nccl": ifn["nccl_source"], "ifname.gloo": ifn["gloo_source"],
                 **({"ifname.tp": ifn["tp_source"]} if "tp_source" in ifn else {}),
                 "deepspeed_runner": ds["source"], "hosts_trap": trap["source"]},
        raw=doc, launchers=_launchers(path, doc))
