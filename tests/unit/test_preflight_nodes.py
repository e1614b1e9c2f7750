"""envgen.preflight.nodes: where a job's nodes come from (DeepSpeed hostfile, --hosts, Slurm,
launcher variables, --local), the master address and port, and launcher_problems."""

from __future__ import annotations

import socket

import pytest

from envgen.errors import UsageError
from envgen.preflight.launcher_vars import launcher_problems
from envgen.preflight.nodes import (
    DEFAULT_MASTER_PORT,
    Job,
    Node,
    expand_nodelist,
    job_from,
    parse_hostfile,
    parse_hosts,
    read_hostfile,
    slurm_tasks_per_node,
)


def usage(fn, *args, **kwargs) -> UsageError:
    with pytest.raises(UsageError) as info:
        fn(*args, **kwargs)
    err = info.value
    assert err.exit_code == 2
    assert err.hint, f"no hint for: {err.message}"
    return err


# ------------------------------------------------------------------ DeepSpeed hostfile


def test_hostfile_lines_comments_and_blanks():
    text = ("# the job's nodes\n"
            "\n"
            "worker-0 slots=8\n"
            "   worker-1\tslots=4   \n"
            "  # indented comment\n"
            "worker-2 slots=2 # inline comment, as DeepSpeed accepts\n"
            "worker-3 slots=1#tight comment\n"
            "worker-4 slots=2 max_slots=4\n")
    nodes = parse_hostfile(text, "hf")
    assert nodes == (Node("worker-0", 8, 3), Node("worker-1", 4, 4), Node("worker-2", 2, 6),
                     Node("worker-3", 1, 7), Node("worker-4", 2, 8))


def test_hostfile_windows_line_endings_keep_line_numbers():
    nodes = parse_hostfile("# c\r\na slots=1\r\n\r\nb slots=2\r\n", "hf")
    assert nodes == (Node("a", 1, 2), Node("b", 2, 4))
    err = usage(parse_hostfile, "a slots=1\r\n\r\nb slots=x\r\n", "hf")
    assert "hf line 3" in err.message


def test_hostfile_bad_line_names_file_and_line():
    err = usage(parse_hostfile, "a slots=1\n# c\nb\n", "/job/hostfile")
    assert err.message.startswith("/job/hostfile line 3: 'b' is not `HOST slots=N`")
    assert "b slots=8" in err.hint
    assert err.source == "/job/hostfile:3"


@pytest.mark.parametrize(("line", "hint_part"), [
    ("a slots = 4", "no space around `=`"),
    ("a slots:4", "no space around `=`"),
    ("aslots=4", "put a space between"),
    ("a b slots=4", "HOST slots=N"),
])
def test_hostfile_malformed_lines_get_a_fitting_hint(line, hint_part):
    err = usage(parse_hostfile, f"ok slots=1\n{line}\n", "hf")
    assert "hf line 2" in err.message and repr(line) in err.message
    assert hint_part in err.hint


@pytest.mark.parametrize("value", ["x", "", "-1", "1.5", "1O", "4,"])
def test_hostfile_slots_must_be_a_whole_number(value):
    err = usage(parse_hostfile, f"a slots=1\n\nb slots={value}\n", "hf")
    assert "hf line 3" in err.message and "slots=" in err.message
    assert err.source == "hf:3"


def test_hostfile_slots_zero_is_refused():
    err = usage(parse_hostfile, "a slots=1\nb slots=0\n", "hf")
    assert "hf line 2" in err.message and "slots=0" in err.message
    assert "remove the line" in err.hint


def test_hostfile_trailing_text_that_would_lose_a_host_is_refused():
    err = usage(parse_hostfile, "a slots=4 b slots=4\n", "hf")
    assert "hf line 1" in err.message and "'b slots=4'" in err.message


def test_hostfile_duplicate_names_both_lines():
    err = usage(parse_hostfile, "a slots=1\nb slots=1\n\na slots=2\n", "hf")
    assert "a is named twice, on lines 1 and 4" in err.message
    assert err.source == "hf:4"


@pytest.mark.parametrize("text", ["", "\n\n", "# only\n  # comments\n", "\r\n"])
def test_hostfile_without_hosts(text):
    err = usage(parse_hostfile, text, "hf")
    assert "names no hosts" in err.message


def test_read_hostfile(tmp_path):
    path = tmp_path / "hostfile"
    path.write_bytes(b"\xef\xbb\xbfnode1 slots=2\nnode2 slots=2\n")  # a BOM, as Notepad writes
    assert read_hostfile(path) == (Node("node1", 2, 1), Node("node2", 2, 2))


def test_read_hostfile_missing_or_unreadable(tmp_path):
    missing = tmp_path / "nope"
    err = usage(read_hostfile, missing)
    assert str(missing) in err.message and "No such file" in err.message
    assert err.source == "--hostfile"
    err = usage(read_hostfile, tmp_path)  # a directory
    assert str(tmp_path) in err.message
    binary = tmp_path / "bin"
    binary.write_bytes(b"\xff\xfe\x00node")
    assert "not UTF-8" in usage(read_hostfile, binary).message


def test_read_hostfile_error_names_the_path(tmp_path):
    path = tmp_path / "hf"
    path.write_text("a slots=1\nb slots=2\nc slots=two\n")
    err = usage(read_hostfile, path)
    assert err.message.startswith(f"{path} line 3:")


# ------------------------------------------------------------------ --hosts / host lists


def test_hosts_plain_and_ranges_keep_order():
    assert [n.name for n in parse_hosts("c,a,b")] == ["c", "a", "b"]
    assert [n.name for n in parse_hosts("node[01-04,07]")] == [
        "node01", "node02", "node03", "node04", "node07"]
    assert [n.name for n in parse_hosts("gpu-[001-003],cpu1")] == [
        "gpu-001", "gpu-002", "gpu-003", "cpu1"]
    # Slurm keeps the order written inside brackets too (scontrol(1): tux[2,1-2] is
    # tux2,tux1,tux2), unlike ClusterShell's sorted NodeSet
    assert [n.name for n in parse_hosts("n[07,01-02]")] == ["n07", "n01", "n02"]
    assert all(n.slots is None and n.line is None for n in parse_hosts("a,b"))


def test_hosts_separators_as_slurm():
    # Slurm's hostlist_create splits at "\t, \n"; runs of separators are one
    assert [n.name for n in parse_hosts(" a, b\tc\nd,,e ")] == ["a", "b", "c", "d", "e"]


def test_hosts_multi_range_and_suffix():
    assert expand_nodelist("r[1-2]-n[1-2]", "x") == ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]
    assert expand_nodelist("n[1-2]-ib,10.0.0.[8-10]", "x") == [
        "n1-ib", "n2-ib", "10.0.0.8", "10.0.0.9", "10.0.0.10"]


@pytest.mark.parametrize("value", ["", "   ", " , ,\n"])
def test_hosts_empty(value):
    err = usage(parse_hosts, value)
    assert err.source == "--hosts"


@pytest.mark.parametrize(("value", "dup"), [
    ("a,b,a", "a"), ("n[1-3],n2", "n2"), ("n[1,1]", "n1"), ("n[01-02],n[02-03]", "n02")])
def test_hosts_duplicates_are_named(value, dup):
    err = usage(parse_hosts, value)
    assert f"{dup} is named twice" in err.message


@pytest.mark.parametrize(("value", "quoted"), [
    ("node[01-", 'missing bracket: "node[01-"'),
    ("n[3-1]", "invalid values in range"),
    ("n[1-010]", "padding length mismatch"),
    ("n[]", "empty range"),
])
def test_hosts_parse_errors_quote_clustershell(value, quoted):
    err = usage(parse_hosts, value)
    assert repr(value) in err.message and quoted in err.message


@pytest.mark.parametrize("value", ["a!b", "@group", "n[1-4/2]", "a&b", "n^x", "f{x}"])
def test_hosts_refuses_clustershell_only_syntax(value):
    err = usage(parse_hosts, value)
    assert "not part of a host name" in err.message


def test_hosts_huge_range_is_refused_fast():
    err = usage(parse_hosts, "n[0-99999999]")
    assert "100000000 hosts" in err.message
    assert "hosts" in usage(parse_hosts, "n[1-1000]x[1-1000]").message
    assert "hosts" in usage(parse_hosts, "n[0-99999999]]").message  # malformed and huge


# ------------------------------------------------------------------ Slurm


def test_slurm_tasks_per_node():
    assert slurm_tasks_per_node("2(x3),1", 4) == [2, 2, 2, 1]
    assert slurm_tasks_per_node("8", 1) == [8]
    assert slurm_tasks_per_node("4(x2)", 2) == [4, 4]
    for bad in ("2(x3", "x", "2(x0)", "2,,1", ""):
        assert usage(slurm_tasks_per_node, bad, 4).source == "SLURM_TASKS_PER_NODE"
    err = usage(slurm_tasks_per_node, "2(x3)", 4)
    assert "3 nodes" in err.message and "has 4" in err.message


def test_slurm_nodelist_expanded_in_order_with_tasks():
    env = {"SLURM_JOB_NODELIST": "node[01-04,07]", "SLURM_TASKS_PER_NODE": "2(x3),1(x2)",
           "SLURM_NNODES": "5", "SLURM_NTASKS": "8", "OTHER": "x"}
    job = job_from(environ=env)
    assert [n.name for n in job.nodes] == ["node01", "node02", "node03", "node04", "node07"]
    assert [n.slots for n in job.nodes] == [2, 2, 2, 1, 1]
    assert job.source == "slurm (SLURM_JOB_NODELIST)"
    assert job.master_addr == "node01" and job.master_from == "first node"
    assert job.slurm == {k: v for k, v in env.items() if k != "OTHER"}
    assert launcher_problems(job) == []


def test_slurm_mixed_names_and_older_variable():
    job = job_from(environ={"SLURM_NODELIST": "gpu-[001-003],cpu1"})
    assert [n.name for n in job.nodes] == ["gpu-001", "gpu-002", "gpu-003", "cpu1"]
    assert job.source == "slurm (SLURM_NODELIST)"
    assert all(n.slots is None for n in job.nodes)


def test_slurm_ntasks_per_node_when_no_tasks_per_node():
    job = job_from(environ={"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NTASKS_PER_NODE": "4"})
    assert [n.slots for n in job.nodes] == [4, 4]


def test_slurm_bad_tasks_per_node_leaves_slots_unknown_and_is_a_problem():
    job = job_from(environ={"SLURM_JOB_NODELIST": "n[1-3]", "SLURM_TASKS_PER_NODE": "2(x2)"})
    assert [n.slots for n in job.nodes] == [None, None, None]
    (summary, evidence), = launcher_problems(job)
    assert "2 nodes" in summary and evidence["SLURM_TASKS_PER_NODE"] == "2(x2)"


def test_slurm_inside_a_step_takes_no_slots_from_step_variables():
    # srun overwrites SLURM_NNODES/NTASKS/TASKS_PER_NODE with the step's values
    env = {"SLURM_JOB_NODELIST": "n[1-4]", "SLURM_JOB_NUM_NODES": "4",
           "SLURM_STEP_NODELIST": "n1", "SLURM_NNODES": "1", "SLURM_NTASKS": "1",
           "SLURM_TASKS_PER_NODE": "1"}
    job = job_from(environ=env)
    assert len(job.nodes) == 4 and all(n.slots is None for n in job.nodes)
    assert launcher_problems(job) == []


def test_slurm_bad_nodelist_is_a_usage_error():
    err = usage(job_from, environ={"SLURM_JOB_NODELIST": "node[01-"})
    assert err.source == "SLURM_JOB_NODELIST" and "missing bracket" in err.message


def test_slurm_counts_disagree():
    env = {"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_NUM_NODES": "3", "SLURM_NNODES": "2",
           "SLURM_TASKS_PER_NODE": "2(x2)", "SLURM_NTASKS": "5", "SLURM_PROCID": "5",
           "SLURM_NODEID": "x"}
    problems = dict(launcher_problems(job_from(environ=env)))
    summaries = " | ".join(problems)
    assert "SLURM_JOB_NUM_NODES=3 but SLURM_JOB_NODELIST=n[1-2] names 2 nodes" in summaries
    assert "SLURM_NTASKS=5 but SLURM_TASKS_PER_NODE=2(x2) adds up to 4" in summaries
    assert "SLURM_PROCID=5 is not below SLURM_NTASKS=5" in summaries
    assert "SLURM_NODEID='x' is not a whole number" in summaries
    assert "SLURM_NNODES" not in summaries


# ------------------------------------------------------------------ sources and precedence


def test_hostfile_source(tmp_path):
    path = tmp_path / "hostfile"
    path.write_text("a slots=2\nb slots=2\n")
    job = job_from(hostfile=path, environ={"SLURM_JOB_NODELIST": "x[1-9]"})
    assert job.source == f"hostfile {path}"
    assert [(n.name, n.slots, n.line) for n in job.nodes] == [("a", 2, 1), ("b", 2, 2)]
    assert job.master_addr == "a" and job.master_port == DEFAULT_MASTER_PORT == 29500
    assert job_from(hostfile=str(path), environ={}).nodes == job.nodes


def test_hosts_source_beats_slurm():
    job = job_from(hosts="a,b", environ={"SLURM_JOB_NODELIST": "x[1-9]", "MASTER_ADDR": "b"})
    assert job.source == "--hosts" and [n.name for n in job.nodes] == ["a", "b"]
    assert job.master_addr == "b" and job.master_from == "MASTER_ADDR"


def test_launcher_variables_source():
    env = {"MASTER_ADDR": "head", "MASTER_PORT": "29600", "NNODES": "4",
           "NPROC_PER_NODE": "8", "PATH": "/bin"}
    job = job_from(environ=env)
    assert job.nodes == (Node("head"),) and job.source == "launcher variables"
    assert job.master_addr == "head" and job.master_port == 29600
    assert job.launcher_vars == {"MASTER_ADDR": "head", "MASTER_PORT": "29600", "NNODES": "4",
                                 "NPROC_PER_NODE": "8"}
    assert launcher_problems(job) == []  # NNODES is not compared with the one known node


def test_local_reads_variables_too():
    env = {"SLURM_JOB_NODELIST": "n[1-2]", "WORLD_SIZE": "2", "MASTER_ADDR": "n1"}
    job = job_from(local=True, environ=env)
    assert job.nodes == (Node(socket.gethostname()),) and job.source == "this node"
    assert job.master_addr == "n1" and job.master_from == "MASTER_ADDR"
    assert job.slurm == {"SLURM_JOB_NODELIST": "n[1-2]"}
    assert job.launcher_vars == {"WORLD_SIZE": "2", "MASTER_ADDR": "n1"}
    alone = job_from(local=True, environ={})
    assert alone.master_addr == socket.gethostname() and alone.master_from == "first node"


def test_nothing_given():
    err = usage(job_from, environ={"PATH": "/bin"})
    assert err.message == "no nodes given"
    for way in ("--hostfile", "--hosts", "SLURM_JOB_NODELIST", "--local"):
        assert way in err.hint


@pytest.mark.parametrize("kwargs", [
    {"hostfile": "hf", "hosts": "a"}, {"hosts": "a", "local": True},
    {"hostfile": "hf", "local": True}])
def test_sources_exclude_each_other(kwargs):
    err = usage(job_from, environ={}, **kwargs)
    assert "given together" in err.message


def test_job_to_dict_and_hashable():
    job = job_from(hosts="a,b", master_port="1234", environ={"RANK": "0"})
    assert job.to_dict() == {
        "nodes": [{"name": "a", "slots": None, "line": None},
                  {"name": "b", "slots": None, "line": None}],
        "source": "--hosts", "master_addr": "a", "master_port": 1234,
        "master_from": "first node", "launcher_vars": {"RANK": "0"}, "slurm": {}}
    assert isinstance(hash(job), int) and isinstance(job, Job)


# ------------------------------------------------------------------ master address and port


def test_master_precedence():
    env = {"MASTER_ADDR": "envhost", "MASTER_PORT": "29601"}
    job = job_from(hosts="a,b", master_addr="cli", master_port=29602, environ=env)
    assert (job.master_addr, job.master_from, job.master_port) == ("cli", "--master-addr", 29602)
    job = job_from(hosts="a,b", environ=env)
    assert (job.master_addr, job.master_from, job.master_port) == ("envhost", "MASTER_ADDR",
                                                                   29601)
    job = job_from(hosts="a,b", environ={})
    assert (job.master_addr, job.master_from, job.master_port) == ("a", "first node", 29500)


@pytest.mark.parametrize(("port", "env", "where"), [
    ("0", {}, "--master-port"), (65536, {}, "--master-port"), ("http", {}, "--master-port"),
    ("", {}, "--master-port"), (True, {}, "--master-port"), (-5, {}, "--master-port"),
    (None, {"MASTER_PORT": "x"}, "MASTER_PORT"), (None, {"MASTER_PORT": "70000"}, "MASTER_PORT"),
    (None, {"MASTER_PORT": ""}, "MASTER_PORT")])
def test_bad_ports_name_their_origin(port, env, where):
    err = usage(job_from, hosts="a", master_port=port, environ=env)
    assert err.source == where and err.message.startswith(where)
    assert "1 to 65535" in err.hint


def test_ports_at_the_limits():
    assert job_from(hosts="a", master_port="65535", environ={}).master_port == 65535
    assert job_from(hosts="a", master_port=" 1 ", environ={}).master_port == 1
    # an explicit port is used even when MASTER_PORT is bad; the bad variable is reported
    job = job_from(hosts="a", master_port=29500, environ={"MASTER_PORT": "x"})
    assert job.master_port == 29500
    assert any("MASTER_PORT='x'" in s for s, _ in launcher_problems(job))


@pytest.mark.parametrize(("kwargs", "where"), [
    ({"master_addr": ""}, "--master-addr"), ({"master_addr": "a b"}, "--master-addr"),
    ({"environ": {"MASTER_ADDR": " "}}, "MASTER_ADDR")])
def test_bad_master_addr(kwargs, where):
    kwargs.setdefault("environ", {})
    err = usage(job_from, hosts="a", **kwargs)
    assert err.source == where


def test_empty_master_addr_alone_is_a_usage_error():
    assert usage(job_from, environ={"MASTER_ADDR": ""}).source == "MASTER_ADDR"


# ------------------------------------------------------------------ launcher_problems


def problems_of(env, **kwargs):
    kwargs.setdefault("hosts", "a,b")
    return launcher_problems(job_from(environ=env, **kwargs))


def test_consistent_torchrun_variables():
    env = {"MASTER_ADDR": "a", "MASTER_PORT": "29500", "WORLD_SIZE": "16", "RANK": "15",
           "LOCAL_RANK": "7", "LOCAL_WORLD_SIZE": "8", "GROUP_RANK": "1", "NODE_RANK": "1",
           "NNODES": "2", "NPROC_PER_NODE": "8"}
    assert problems_of(env) == []


def test_world_size_against_nnodes_times_nproc():
    (summary, evidence), = problems_of({"WORLD_SIZE": "8", "NNODES": "2",
                                        "NPROC_PER_NODE": "2"})
    assert summary == "WORLD_SIZE=8 but NNODES × NPROC_PER_NODE = 2 × 2 = 4"
    assert evidence == {"WORLD_SIZE": "8", "NNODES": "2", "NPROC_PER_NODE": "2", "expected": 4}


def test_rank_and_local_rank_bounds():
    summaries = [s for s, _ in problems_of({"WORLD_SIZE": "4", "RANK": "4", "LOCAL_RANK": "2",
                                            "NPROC_PER_NODE": "2"})]
    assert "RANK=4 is not below WORLD_SIZE=4 (ranks run from 0 to 3)" in summaries
    assert "LOCAL_RANK=2 is not below NPROC_PER_NODE=2" in summaries
    summaries = [s for s, _ in problems_of({"LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "2",
                                            "NPROC_PER_NODE": "4"})]
    assert "LOCAL_RANK=3 is not below LOCAL_WORLD_SIZE=2" in summaries
    assert any(s.startswith("LOCAL_WORLD_SIZE=2 but NPROC_PER_NODE=4") for s in summaries)


def test_nnodes_against_the_job():
    (summary, evidence), = problems_of({"NNODES": "3"})
    assert summary == "NNODES=3 but the job has 2 nodes (from --hosts)"
    assert evidence["nodes"] == 2
    assert problems_of({"NNODES": "1:4"}) == []  # torchrun's elastic MIN:MAX
    assert problems_of({"NNODES": "3:4"})
    assert problems_of({"PET_NNODES": "2"}) == []
    summaries = [s for s, _ in problems_of({"NNODES": "2", "NODE_RANK": "2", "GROUP_RANK": "5"})]
    assert any(s.startswith("NODE_RANK=2 is not below NNODES=2") for s in summaries)
    assert any(s.startswith("GROUP_RANK=5 is not below NNODES=2") for s in summaries)


def test_nnodes_not_compared_for_local():
    assert problems_of({"NNODES": "4"}, hosts=None, local=True) == []


@pytest.mark.parametrize(("name", "value"), [
    ("WORLD_SIZE", "eight"), ("WORLD_SIZE", "0"), ("RANK", "-1"), ("LOCAL_RANK", "1.0"),
    ("NNODES", "two"), ("NNODES", "4:2"), ("NNODES", "0"), ("NPROC_PER_NODE", "-2"),
    ("NPROC_PER_NODE", "0"), ("GROUP_RANK", "x"), ("SLURM_NTASKS", "many")])
def test_non_integer_values(name, value):
    (summary, evidence), = problems_of({name: value})
    assert summary.startswith(f"{name}={value!r} is not")
    assert evidence == {name: value}


@pytest.mark.parametrize("word", ["gpu", "cpu", "auto", "xpu"])
def test_nproc_per_node_words_are_torchruns(word):
    assert problems_of({"NPROC_PER_NODE": word, "WORLD_SIZE": "16", "NNODES": "2"}) == []


def test_explicit_master_differs_from_the_shells():
    env = {"MASTER_ADDR": "b", "MASTER_PORT": "29501"}
    summaries = [s for s, _ in problems_of(env, master_addr="a", master_port=29502)]
    assert any(s.startswith("--master-addr a but MASTER_ADDR=b") for s in summaries)
    assert any(s.startswith("--master-port 29502 but MASTER_PORT=29501") for s in summaries)
    assert problems_of(env, master_addr="b", master_port="29501") == []
