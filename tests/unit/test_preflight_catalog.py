"""matrix/curated/preflight.toml is checked against envgen/schemas/curated-preflight.schema.json
and its cross references (a kind's fix pattern, an ssh error's kind, each ssh sample's own
classification) when preflight loads it; the catalog turns ssh stderr into kinds and builds
findings whose severity, source and pattern come from the kind."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from envgen.doctor.findings import Finding
from envgen.errors import DataError
from envgen.preflight.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "matrix" / "curated" / "preflight.toml"
FIXTURE = ROOT / "tests" / "fixtures" / "matrix"

# the finding kinds issue 17's plan fixes (the rules refer to them by these ids)
PLAN_KINDS = (
    "launcher-vars-inconsistent", "host-unresolved", "host-resolves-differently",
    "hostname-loopback", "ssh-auth-failed", "ssh-host-key", "ssh-unreachable", "ssh-refused",
    "ssh-failed", "python-missing", "node-env-differs", "node-env-unknown", "slots-exceed-gpus",
    "slots-exceed-cpus", "ifname-missing", "ifname-unreaching", "nccl-settings", "shm-small",
    "memlock-limited", "master-unreachable", "master-port-taken", "master-port-blocked",
    "collective-failed", "collective-hang", "collective-ok", "node-lost", "check-skipped",
    "env-not-forwarded")


@pytest.mark.parametrize("matrix", [ROOT / "matrix", FIXTURE])
def test_the_shipped_and_the_fixture_catalog_load(matrix):
    catalog = load_catalog(matrix)
    assert set(PLAN_KINDS) <= set(catalog.kinds)
    assert all(k.severity in ("error", "warning", "info") for k in catalog.kinds.values())
    assert all(k.source.startswith("https://") for k in catalog.kinds.values())
    assert catalog.shm_min_bytes == 1 << 30 and catalog.shm_docker_default_bytes == 64 << 20
    assert catalog.default_port == 29500
    assert catalog.memlock_required == "unlimited"
    assert "* hard memlock unlimited" in catalog.memlock_limits_conf
    assert "--ulimit memlock=-1" in catalog.memlock_docker_fix
    assert catalog.deepspeed_env_file == ".deepspeed_env"
    assert catalog.deepspeed_default_launcher == "pdsh"
    assert {"NCCL_IB_DISABLE", "NCCL_SOCKET_IFNAME", "NCCL_ASYNC_ERROR_HANDLING",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_BLOCKING_WAIT"} <= set(catalog.nccl_settings)
    assert load_catalog(matrix) is catalog  # cached per folder


def test_the_fixture_is_the_shipped_file_with_a_header():
    fixture = (FIXTURE / "curated" / "preflight.toml").read_text(encoding="utf-8")
    assert fixture.split("\n", 2)[2] == SHIPPED.read_text(encoding="utf-8")


def test_fix_patterns_are_those_of_the_doctor():
    from envgen.doctor.catalog import load_catalog as load_doctor

    patterns = set(load_doctor(ROOT / "matrix").patterns)
    used = {k.pattern for k in load_catalog(ROOT / "matrix").kinds.values() if k.pattern}
    assert used and used <= patterns


# ------------------------------------------------------------------------------ ssh stderr

@pytest.mark.parametrize(("stderr", "kind"), [
    ("ubuntu@10.0.0.12: Permission denied (publickey).", "ssh-auth-failed"),
    ("root@node2: Permission denied (publickey,gssapi-keyex,gssapi-with-mic).", "ssh-auth-failed"),
    ("root@node2: Permission denied (publickey,password).", "ssh-auth-failed"),
    ("Host key verification failed.", "ssh-host-key"),
    ("No ED25519 host key is known for node2 and you have requested strict checking.\n"
     "Host key verification failed.", "ssh-host-key"),
    ("@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
     "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n"
     "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
     "IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!", "ssh-host-key"),
    ("ssh: connect to host 10.0.0.12 port 22: Connection timed out", "ssh-unreachable"),
    ("ssh: connect to host node3 port 2222: Operation timed out", "ssh-unreachable"),
    ("ssh: connect to host 10.0.0.12 port 22: No route to host", "ssh-unreachable"),
    ("ssh: connect to host 10.9.0.1 port 22: Network is unreachable", "ssh-unreachable"),
    ("Connection timed out during banner exchange\n"
     "Connection to 10.0.0.12 port 22 timed out", "ssh-unreachable"),
    ("ssh: connect to host 10.0.0.12 port 22: Connection refused", "ssh-refused"),
    ("ssh: Could not resolve hostname ft-67ea02bd700cbb7-main-0.ft-67ea02bd700cbb7: Name or "
     "service not known", "host-unresolved"),
    ("ssh: Could not resolve hostname node9: Temporary failure in name resolution",
     "host-unresolved"),
    ("Warning: Permanently added 'node2' (ED25519) to the list of known hosts.\r\n"
     "ubuntu@node2: Permission denied (publickey).", "ssh-auth-failed"),
])
def test_ssh_stderr_is_classified(stderr, kind):
    assert load_catalog(ROOT / "matrix").classify_ssh(stderr) == kind


@pytest.mark.parametrize("stderr", [
    "kex_exchange_identification: Connection closed by remote host\n"
    "Connection closed by 10.0.0.12 port 22",
    "bash: line 1: python3: command not found",
    "",
])
def test_other_ssh_stderr_is_left_to_ssh_failed(stderr):
    catalog = load_catalog(ROOT / "matrix")
    assert catalog.classify_ssh(stderr) is None
    assert "ssh-failed" in catalog.kinds


def test_every_ssh_sample_is_classified_as_its_record_says():
    catalog = load_catalog(ROOT / "matrix")
    rows = catalog.raw["ssh_error"]
    assert {r["kind"] for r in rows} == {"ssh-auth-failed", "ssh-host-key", "ssh-unreachable",
                                         "ssh-refused", "host-unresolved"}
    for row in rows:
        assert catalog.classify_ssh(row["sample"]) == row["kind"]
        assert "github.com/openssh/openssh-portable/blob/V_" in row["source"]


# ------------------------------------------------------------------------------ findings

def test_a_finding_takes_severity_source_and_pattern_from_its_kind():
    catalog = load_catalog(ROOT / "matrix")
    f = catalog.finding("ssh-host-key", "node2's host key is not known",
                        {"node": "node2"}, "ssh-keyscan -H node2 >> ~/.ssh/known_hosts",
                        command="ssh-keyscan -H node2 >> ~/.ssh/known_hosts")
    kind = catalog.kinds["ssh-host-key"]
    assert isinstance(f, Finding)
    assert (f.kind, f.severity, f.source, f.pattern) == (
        "ssh-host-key", "error", kind.source, "tune-distributed")
    assert f.evidence == {"node": "node2"} and f.command.startswith("ssh-keyscan")
    assert f.to_dict()["severity"] == "error"


def test_a_finding_without_fix_words_uses_the_kinds():
    catalog = load_catalog(ROOT / "matrix")
    f = catalog.finding("memlock-limited", "ulimit -l is 8192 on node2", {"soft": 8192}, None)
    assert f.severity == "warning" and "memlock" in f.fix
    assert catalog.finding("collective-ok", "ok", {}, None).pattern is None


def test_an_unknown_kind_is_a_data_error_naming_it():
    with pytest.raises(DataError) as info:
        load_catalog(ROOT / "matrix").finding("no-such-kind", "x", {}, "y")
    assert "'no-such-kind'" in str(info.value) and "preflight.toml" in str(info.value)


# ------------------------------------------------------------------------------ rules as data

def test_nccl_socket_ifname_rules():
    rules = load_catalog(ROOT / "matrix").ifname
    names = ["lo", "eth0", "eth10", "ens5", "docker0", "ib0"]
    assert rules.nccl_selects("eth", names) == ("eth0", "eth10")
    assert rules.nccl_selects("=eth0", names) == ("eth0",)
    assert rules.nccl_selects("=eth0,ens5", names) == ("eth0", "ens5")
    assert rules.nccl_selects("^docker,lo", names) == ("eth0", "eth10", "ens5", "ib0")
    assert rules.nccl_selects("^=docker0", names) == ("lo", "eth0", "eth10", "ens5", "ib0")
    assert rules.nccl_selects("=eth0:1", names) == ("eth0",)
    assert rules.nccl_selects("e", names) is None  # one character: NCCL picks by itself
    assert rules.nccl_selects("=eth9", names) == ()
    assert rules.nccl_auto_order[0] == "ib" and "^docker,lo,virbr" in rules.nccl_auto_order


def test_gloo_socket_ifname_is_a_list_of_exact_names():
    rules = load_catalog(ROOT / "matrix").ifname
    assert rules.gloo_var == "GLOO_SOCKET_IFNAME" and rules.tp_var == "TP_SOCKET_IFNAME"
    assert rules.gloo_names("eth0,eth1, eth2") == ("eth0", "eth1", "eth2")
    assert rules.gloo_names("") == ()


def test_what_deepspeed_forwards_to_the_other_nodes():
    catalog = load_catalog(ROOT / "matrix")
    assert catalog.deepspeed_forwards("NCCL_SOCKET_IFNAME")
    assert catalog.deepspeed_forwards("PYTHONPATH") and catalog.deepspeed_forwards("UCX_TLS")
    assert not catalog.deepspeed_forwards("GLOO_SOCKET_IFNAME")
    assert not catalog.deepspeed_forwards("WANDB_API_KEY")
    assert not catalog.deepspeed_forwards("CUDA_VISIBLE_DEVICES")
    assert catalog.deepspeed_hostfile_regex.search("worker-0 slots=4").groups() == (
        "worker-0", "4")


def test_the_hosts_trap():
    catalog = load_catalog(ROOT / "matrix")
    assert catalog.hosts_debian_address == "127.0.1.1"
    assert catalog.is_loopback("127.0.1.1") and catalog.is_loopback("127.0.0.1")
    assert not catalog.is_loopback("10.0.0.12") and not catalog.is_loopback("node2")


# ------------------------------------------------------------------------------ bad files

def _broken(tmp_path: Path, name: str, old: str, new: str, count: int = 1) -> Path:
    """A matrix dir (its own path: load_catalog is cached per path) whose preflight.toml is the
    shipped one with ``old`` replaced by ``new`` (``count`` times), next to the shipped
    doctor.toml (the fix patterns are checked against it)."""
    text = SHIPPED.read_text(encoding="utf-8")
    assert old in text
    matrix = tmp_path / name
    (matrix / "curated").mkdir(parents=True)
    (matrix / "curated" / "preflight.toml").write_text(text.replace(old, new, count),
                                                       encoding="utf-8")
    shutil.copy(ROOT / "matrix" / "curated" / "doctor.toml", matrix / "curated")
    return matrix


def _message(matrix: Path) -> str:
    with pytest.raises(DataError) as info:
        load_catalog(matrix)
    text = str(info.value)
    assert str(matrix / "curated" / "preflight.toml") in text
    return text


def test_a_missing_file_is_named(tmp_path):
    (tmp_path / "curated").mkdir()
    text = _message(tmp_path)
    assert "is missing" in text


def test_a_kind_without_source_is_refused(tmp_path):
    text = SHIPPED.read_text(encoding="utf-8")
    line = re.search(r'(?m)^source = "https://github.com/pytorch/pytorch/blob/cf30153c4c131c8164'
                     r'ee7798e5022d810682e2cb/torch/distributed/rendezvous.py[^\n]*\n', text)[0]
    matrix = _broken(tmp_path, "source", line, "")
    assert "kind[0] (launcher-vars-inconsistent): missing 'source'" in _message(matrix)


def test_a_bad_severity_names_the_field(tmp_path):
    matrix = _broken(tmp_path, "severity", 'severity = "warning"', 'severity = "fatal"')
    assert re.search(r"kind\[\d+\]\.severity \(host-resolves-differently\): 'fatal' is not a "
                     r"severity", _message(matrix))


def test_an_unknown_key_names_the_record(tmp_path):
    matrix = _broken(tmp_path, "unknown", 'id = "shm-small"\n', 'id = "shm-small"\nseverty = 1\n')
    assert re.search(r"kind\[\d+\] \(shm-small\): unknown key\(s\) severty", _message(matrix))


def test_a_missing_section_is_refused(tmp_path):
    matrix = _broken(tmp_path, "section", "[memlock]\n", "[memlocks]\n")
    assert "unknown key(s) memlocks" in _message(matrix)


def test_a_threshold_of_the_wrong_type_is_refused(tmp_path):
    matrix = _broken(tmp_path, "shm", "min_bytes = 1073741824", 'min_bytes = "1g"')
    assert "shm.min_bytes: '1g' is not a size in bytes" in _message(matrix)


def test_a_source_that_is_not_a_url_is_refused(tmp_path):
    matrix = _broken(tmp_path, "url", 'source = "https://github.com/NVIDIA/nccl-tests/blob/v2.19.6/'
                     'doc/PERFORMANCE.md#allreduce"', 'source = "nccl-tests PERFORMANCE.md"')
    assert re.search(r"kind\[\d+\]\.source \(collective-ok\): 'nccl-tests PERFORMANCE.md' is not "
                     r"a citation", _message(matrix))


def test_a_dangling_pattern_is_refused(tmp_path):
    matrix = _broken(tmp_path, "pattern", 'pattern = "tune-distributed"',
                     'pattern = "tune-distribution"')
    assert "kind launcher-vars-inconsistent names pattern 'tune-distribution'" in _message(matrix)


def test_an_ssh_error_of_an_unknown_kind_is_refused(tmp_path):
    matrix = _broken(tmp_path, "sshkind", 'kind = "ssh-refused"', 'kind = "ssh-refusal"')
    assert re.search(r"ssh_error\[\d+\]\.kind 'ssh-refusal' is not a \[\[kind\]\] id",
                     _message(matrix))


def test_a_regex_that_does_not_compile_is_refused(tmp_path):
    matrix = _broken(tmp_path, "regex", "regex = 'Could not resolve hostname'",
                     "regex = 'Could not (resolve hostname'")
    assert re.search(r"ssh_error\[\d+\]\.regex 'Could not \(resolve hostname' is not a regular "
                     r"expression", _message(matrix))


def test_a_sample_its_regex_does_not_classify_is_refused(tmp_path):
    matrix = _broken(tmp_path, "sample", 'sample = "Host key verification failed."',
                     'sample = "Host key check failed."')
    text = _message(matrix)
    assert "'Host key check failed.' is classified as None, not 'ssh-host-key'" in text


def test_a_repeated_kind_id_is_refused(tmp_path):
    matrix = _broken(tmp_path, "repeat", 'id = "ssh-refused"', 'id = "ssh-unreachable"')
    assert "repeats id 'ssh-unreachable'" in _message(matrix)


def test_at_most_five_problems_are_listed(tmp_path):
    matrix = _broken(tmp_path, "many", 'severity = "error"', 'severity = "fatal"', count=7)
    text = _message(matrix)
    assert text.count("is not a severity") == 5
    assert "… and 2 more" in text
