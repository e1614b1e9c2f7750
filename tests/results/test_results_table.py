"""The compatibility table: exact output against goldens for the fixture matrix + records
(both kinds), tiers and evidence per row, upstream citations (fakes of envgen.results.upstream's
shape), and the README block replaced without touching a byte outside its markers.

Regenerate the goldens after an intended change with
    ENVGEN_UPDATE_GOLDEN=1 pytest tests/results/test_results_table.py
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from results_data import GOLDEN

from envgen.errors import InfeasibleError, UsageError
from envgen.resolve import Request, resolve
from envgen.results import build_table, load
from envgen.results.table import (
    END,
    HEADER,
    START,
    Citation,
    latest_releases,
    untested_candidates,
)
from envgen.results.table_render import (
    render_json,
    render_markdown,
    render_readme_block,
    replace_block,
    write_outputs,
)


def _check_golden(name: str, text: str) -> None:
    golden = GOLDEN / name
    if os.environ.get("ENVGEN_UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8"), f"ENVGEN_UPDATE_GOLDEN=1 rewrites {golden}"


@pytest.fixture
def table(facts, project):
    return build_table(facts, load(project / "matrix" / "results"))


def test_markdown_page_matches_golden(table, project):
    text = render_markdown(table, project / "docs" / "compatibility.md")
    assert text.startswith(f"---\nhide:\n  - toc\n---\n<!-- {HEADER} -->\n")
    _check_golden("compatibility.md", text)


def test_json_matches_golden(table, project):
    text = render_json(table, project)
    assert json.loads(text)["generated"] == HEADER
    _check_golden("compatibility.json", text)


def test_readme_block_matches_golden(table, project):
    text = render_readme_block(table, project / "README.md", project / "docs" / "compatibility.md")
    _check_golden("README-block.md", text + "\n")


def test_rows_are_recorded_combinations_plus_the_resolvers_best_per_torch_and_cuda(facts, table):
    recorded = {r.combination for r in table.rows if r.records}
    assert recorded == {
        "deepspeed-0.18.2-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64",
        "deepspeed-0.18.2-torch2.9.0-cu128-py3.12-ubuntu22.04-x86_64",
        "deepspeed-0.16.4-torch2.5.1-cu121-py3.11-debian12-x86_64",
        "megatron-core-0.12.0-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64",
        "megatron-core-0.12.0-torch2.7.1-cu126-py3.12-ubuntu22.04-x86_64",
        "colossalai-0.4.6-torch2.5.1-cu124-py3.12-ubuntu22.04-x86_64",
        "colossalai-0.4.6-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64",
    }
    assert latest_releases(facts) == {"deepspeed": "0.18.2", "megatron-core": "0.12.0",
                                      "colossalai": "0.4.6"}
    expected = set()
    for framework, version in latest_releases(facts).items():
        for torch in ("1.13", "2.1", "2.5", "2.7", "2.9"):
            for cuda in ("11.7", "11.8", "12.1", "12.4", "12.6", "12.8"):
                try:
                    best = resolve(Request(framework=framework, framework_version=version,
                                           torch=torch, cuda=cuda), facts, limit=1)
                except InfeasibleError:
                    continue
                expected.add(best[0].id)
    assert {c.id for c in untested_candidates(facts)} == expected
    ids = [r.combination for r in table.rows]
    assert len(ids) == len(set(ids)) and set(ids) == expected | recorded
    assert all(r.status == "untested" and r.tier == "T0" and r.evidence == () and
               r.flavor is None for r in table.rows if not r.records)
    assert table.summary == {"T0": 10, "T1": 1, "T2": 2, "T3": 0, "T4": 2, "known-bad": 3}


def _rows(table) -> dict:
    return {r.combination: r for r in table.rows}


def test_each_row_has_its_tier_the_record_proving_it_and_what_failed(table):
    found = {c: (r.tier, r.tier_label, r.flavor, r.status, r.note,
                 [(e.tier, e.status) for e in r.evidence])
             for c, r in _rows(table).items() if r.records}
    assert found == {
        # a failed T2 after a passing T1: T1, and the T2 failure listed after its proof
        "deepspeed-0.18.2-torch2.9.0-cu128-py3.12-ubuntu22.04-x86_64":
            ("T1", "locked", "venv", "known-bad", None, [("T1", "pass"), ("T2", "fail")]),
        # a verify record on 8 GPUs proves T4 (the older T3 failure below it is not shown)
        "deepspeed-0.18.2-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64":
            ("T4", "multi-GPU", None, "known-good", None, [("T4", "pass")]),
        "deepspeed-0.16.4-torch2.5.1-cu121-py3.11-debian12-x86_64":
            ("T4", "multi-GPU", None, "known-good", None, [("T4", "pass")]),
        "megatron-core-0.12.0-torch2.7.1-cu126-py3.12-ubuntu22.04-x86_64":
            ("T2", "built", "conda", "untested", None, [("T2", "pass")]),
        "megatron-core-0.12.0-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64":
            ("T2", "built", None, "untested", "CPU only", [("T2", "pass")]),
        "colossalai-0.4.6-torch2.5.1-cu124-py3.12-ubuntu22.04-x86_64":
            ("T0", "resolves", None, "known-bad", None, [("T4", "fail")]),
        "colossalai-0.4.6-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64":
            ("T0", "resolves", None, "known-bad", None, [("T1", "fail")]),
    }


def test_json_rows_carry_tiers_and_evidence_objects(table, project):
    data = json.loads(render_json(table, project))
    assert data["schema"] == 2
    assert data["summary"] == {"T0": 10, "T1": 1, "T2": 2, "T3": 0, "T4": 2, "known-bad": 3}
    rows = {r["combination"]: r for r in data["rows"]}
    row = rows["deepspeed-0.18.2-torch2.9.0-cu128-py3.12-ubuntu22.04-x86_64"]
    assert list(row) == ["combination", "framework", "framework_version", "torch", "cuda",
                         "python", "os", "platform", "tier", "tier_label", "flavor", "status",
                         "note", "date", "evidence", "records"]
    assert (row["tier"], row["tier_label"], row["flavor"], row["status"], row["date"],
            row["records"]) == ("T1", "locked", "venv", "known-bad", "2026-03-06", 2)
    proof, failed = row["evidence"]["records"]
    folder = "matrix/results/deepspeed-0.18.2-torch2.9.0-cu128-py3.12-ubuntu22.04-x86_64"
    assert proof == {
        "path": f"{folder}/20260305T100012Z-589db3e3c2a2.json", "tier": "T1", "status": "pass",
        "date": "2026-03-05", "machine": "2 CPUs, Debian GNU/Linux 12, no GPU",
        "envgen": "0.1.0", "log_digest": proof["log_digest"], "error": None, "seconds": 12.3,
        "image_size_bytes": None}
    assert failed == {
        "path": f"{folder}/20260306T090711Z-dd132156c55f.json", "tier": "T2", "status": "fail",
        "date": "2026-03-06", "machine": "2 CPUs, Debian GNU/Linux 12, no GPU",
        "envgen": "0.1.0", "log_digest": failed["log_digest"],
        "error": 'cpu_adam: error: identifier "__nv_bfloat162" is undefined', "seconds": 431.2,
        "image_size_bytes": 9876543210}
    assert proof["log_digest"].startswith("sha256:") and failed["log_digest"] != \
        proof["log_digest"]
    assert row["evidence"]["upstream"] == []
    gpu = rows["deepspeed-0.18.2-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64"]
    (record,) = gpu["evidence"]["records"]
    assert (record["tier"], record["machine"], record["seconds"], record["image_size_bytes"]) \
        == ("T4", "8× NVIDIA H200, driver 570.124.06", 361.5, None)
    untested = rows["deepspeed-0.18.2-torch2.7.1-cu126-py3.12-ubuntu22.04-x86_64"]
    assert untested["evidence"] == {"records": [], "upstream": []}
    assert (untested["tier"], untested["tier_label"], untested["flavor"]) == (
        "T0", "resolves", None)


class FakeUpstream:
    """The shape build_table needs of envgen.results.upstream's citations."""

    def __init__(self, framework: str, torch: str, source: str, cuda: str | None = None):
        self.framework, self.torch, self.source, self.cuda = framework, torch, source, cuda
        self.calls: list[tuple] = []

    def matches(self, framework, framework_version, torch, cuda, python=None) -> bool:
        self.calls.append((framework, framework_version, torch, cuda, python))
        return framework == self.framework and torch.startswith(self.torch) and \
            (self.cuda is None or cuda == self.cuda)

    def to_dict(self) -> dict:
        return {"kind": "ci", "what": f"{self.framework}'s \"CI\" | nightly on torch {self.torch}",
                "source": self.source, "observed": "2026-03-01"}


def test_upstream_citations_are_shown_and_never_count_as_a_tier(facts, project, table):
    ci = FakeUpstream("deepspeed", "2.9", "https://github.com/example/deepspeed/ci.yml")
    notes = FakeUpstream("megatron-core", "2.5.1", "release notes", cuda="12.1")
    cited = build_table(facts, load(project / "matrix" / "results"), [ci, notes])
    assert cited.summary == table.summary
    assert sorted((r.combination, r.tier, r.status) for r in cited.rows) == sorted(
        (r.combination, r.tier, r.status) for r in table.rows)  # the ranking may move them
    assert ("deepspeed", "0.18.2", "2.9.0", "12.8", "3.12") in ci.calls
    rows = _rows(cited)
    ds = rows["deepspeed-0.18.2-torch2.9.0-cu128-py3.12-ubuntu22.04-x86_64"]
    mc = rows["megatron-core-0.12.0-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64"]
    assert ds.upstream == (Citation.of(ci),) and mc.upstream == (Citation.of(notes),)
    assert sum(bool(r.upstream) for r in cited.rows) == 2
    data = {r["combination"]: r for r in json.loads(render_json(cited, project))["rows"]}
    assert data[ds.combination]["evidence"]["upstream"] == [ci.to_dict()]
    page = _without_anchors(render_markdown(cited, project / "docs" / "compatibility.md"))
    line = next(x for x in page.splitlines() if x.startswith("| deepspeed 0.18.2 | 2.9.0 |"))
    assert line.endswith(' | [ci](https://github.com/example/deepspeed/ci.yml "deepspeed\'s '
                         '\'CI\' \\| nightly on torch 2.9 (observed 2026-03-01)") |')
    line = next(x for x in page.splitlines()
                if x.startswith("| megatron-core 0.12.0 | 2.5.1 | 12.1 |"))
    assert line.endswith(" | ci |")  # not a URL: named, not linked
    block = render_readme_block(cited, project / "README.md", project / "docs" / "c.md")
    # counts unchanged; among equal tiers the cited combination is the best proven (the policy)
    plain = render_readme_block(build_table(facts, load(project / "matrix" / "results")),
                                project / "README.md", project / "docs" / "c.md")
    assert [x.split(" | ")[:-1] for x in block.splitlines()] == [
        x.split(" | ")[:-1] for x in plain.splitlines()]
    assert "megatron-core-0.12.0-torch2.5.1-cu121" in block.split("| megatron-core |")[1]


def _without_anchors(page: str) -> str:
    return re.sub(r'<a id="[^"]+"></a>', "", page)


def test_rows_of_the_page_are_addressable_by_combination_id(table, project):
    """An image's io.envgen.table-row label links to <site>/compatibility/#<id>."""
    page = render_markdown(table, project / "docs" / "compatibility.md")
    rows = [x for x in page.splitlines() if x.startswith("| <a id=")]
    assert len(rows) == len(table.rows)
    assert {re.match(r'\| <a id="([^"]+)"></a>', x).group(1) for x in rows} == {
        r.combination for r in table.rows}


def test_markdown_tier_and_evidence_cells(table, project):
    page = _without_anchors(render_markdown(table, project / "docs" / "compatibility.md"))
    lines = page.splitlines()
    header = "| framework | torch | CUDA | Python | OS | tier | evidence | upstream |"
    assert lines.index(header) > lines.index("| T4 multi-GPU | on ≥ 2 GPUs, the NCCL smoke "
                                             "test (collectives and the framework's engine "
                                             "steps) passes |")  # the legend is above
    assert "| upstream | another project's CI" in page
    folder = "evidence/deepspeed-0.18.2-torch2.9.0-cu128-py3.12-ubuntu22.04-x86_64"
    row = next(x for x in lines if x.startswith("| deepspeed 0.18.2 | 2.9.0 |"))
    assert row == (
        "| deepspeed 0.18.2 | 2.9.0 | 12.8 | 3.12 | ubuntu-22.04 | T1 locked · T2 failed | "
        f"[T1 2026-03-05]({folder}/20260305T100012Z-589db3e3c2a2.json \"2 CPUs, Debian "
        "GNU/Linux 12, no GPU · envgen 0.1.0\") "
        f"[T2 failed 2026-03-06]({folder}/20260306T090711Z-dd132156c55f.json \"2 CPUs, "
        "Debian GNU/Linux 12, no GPU · envgen 0.1.0 · cpu_adam: error: identifier "
        "'__nv_bfloat162' is undefined\") |  |")
    assert "| T0 resolves |  |  |" in page
    assert lines[-1] == ("15 combinations: 10 T0 resolves, 1 T1 locked, 2 T2 built, 0 T3 GPU, "
                         "2 T4 multi-GPU; 3 known-bad.")


README = (
    "# Project\r\n\r\nSome text with trailing spaces   \r\n"  # CRLF lines before the block
    "Prose may mention `<!-- envgen:table:start -->` inline.\n"
    "  <!-- envgen:table:start -->  \n"
    "| stale | table |\n\nmore stale text\n"
    "<!-- envgen:table:end -->\n"
    "\n## After\n\nünïcødé and no newline at the end"
).encode()


def test_readme_replacement_keeps_every_byte_outside_the_markers():
    out = replace_block(README, "NEW BLOCK\nline 2")
    start = README.index(b"  <!-- envgen:table:start -->  ") + len(
        b"  <!-- envgen:table:start -->  ")
    end = README.index(b"<!-- envgen:table:end -->")
    assert out.startswith(README[:start])
    assert out.endswith(README[end:])
    assert out[start:len(out) - len(README[end:])] == b"\nNEW BLOCK\nline 2\n"
    assert replace_block(out, "NEW BLOCK\nline 2") == out  # idempotent
    assert replace_block(README, "") == README[:start] + b"\n\n" + README[end:]


@pytest.mark.parametrize(("readme", "found"), [
    (b"# no markers\n", "found 0 and 0"),
    (f"{START}\nonly a start\n".encode(), "found 1 and 0"),
    (f"{START}\n{END}\n{START}\n{END}\n".encode(), "found 2 and 2"),
    (f"text `{START}` and `{END}` inline only\n".encode(), "found 0 and 0"),
])
def test_missing_or_repeated_markers_are_a_usage_error(readme, found):
    with pytest.raises(UsageError, match=found) as exc:
        replace_block(readme, "x")
    assert exc.value.exit_code == 2
    assert START in exc.value.hint and END in exc.value.hint


def test_reversed_markers_are_a_usage_error():
    with pytest.raises(UsageError, match="end marker comes before the start marker"):
        replace_block(f"{END}\n{START}\n".encode(), "x")


def test_write_outputs_writes_three_files_and_then_nothing(table, project):
    page, data, readme = (project / "docs" / "compatibility.md",
                          project / "docs" / "compatibility.json", project / "README.md")
    before = readme.read_bytes()
    written = write_outputs(table, page=page, data=data, readme=readme)
    assert [(w.path, w.changed) for w in written] == [(page, True), (data, True), (readme, True)]
    assert page.read_text() == (GOLDEN / "compatibility.md").read_text()
    assert data.read_text() == (GOLDEN / "compatibility.json").read_text()
    block = (GOLDEN / "README-block.md").read_text()
    assert readme.read_text() == before.decode().replace(
        "\nold table\n", "\n" + block)
    mtimes = [p.stat().st_mtime_ns for p in (page, data, readme)]
    again = write_outputs(table, page=page, data=data, readme=readme)
    assert [w.changed for w in again] == [False, False, False]
    assert [p.stat().st_mtime_ns for p in (page, data, readme)] == mtimes
    assert not [p for p in project.rglob(".*.tmp")]


def test_a_readme_without_markers_writes_nothing(table, project):
    readme = project / "README.md"
    readme.write_text("# no markers here\n")
    with pytest.raises(UsageError, match=r"README\.md needs exactly one"):
        write_outputs(table, page=project / "docs" / "compatibility.md",
                      data=project / "docs" / "compatibility.json", readme=readme)
    assert sorted(p.name for p in (project / "docs").iterdir()) == []
    assert readme.read_text() == "# no markers here\n"


def test_a_missing_readme_is_a_usage_error(table, tmp_path):
    out = tmp_path / "elsewhere"
    out.mkdir()
    with pytest.raises(UsageError, match="no README at"):
        write_outputs(table, page=out / "p.md", data=out / "p.json", readme=out / "README.md")
    assert list(out.iterdir()) == []


def test_no_records_gives_only_t0_rows(facts, tmp_path):
    table = build_table(facts, [])
    assert table.summary == {"T0": 14, "T1": 0, "T2": 0, "T3": 0, "T4": 0, "known-bad": 0}
    block = render_readme_block(table, tmp_path / "README.md", tmp_path / "docs" / "c.md")
    assert "No evidence recorded yet." in block and "| framework |" not in block
    assert "14 more combinations (the resolver's best per framework, torch and CUDA) only " \
           "resolve (T0); every row with its records and upstream citations: the " \
           "[full table](docs/c.md)." in block


def test_the_readme_block_sums_up_each_framework(table, project):
    """A front-page summary that stays short as records come: per framework, the combinations
    at each tier, those with a failed record, and the best-proven one linked to its record."""
    block = render_readme_block(table, project / "README.md", project / "docs" / "c.md")
    rows = {x.split(" | ")[0].removeprefix("| "): x.split(" | ")
            for x in block.splitlines() if x.startswith("| ") and not x.startswith("| framework")}
    assert set(rows) == {"deepspeed", "megatron-core", "colossalai"}
    assert rows["deepspeed"][1:6] == ["2", "0", "0", "1", "1"]  # T4, T3, T2, T1, failed
    assert rows["megatron-core"][1:6] == ["0", "0", "2", "0", "0"]
    assert rows["colossalai"][1:6] == ["0", "0", "0", "0", "2"] and rows["colossalai"][6] == "— |"
    assert "[deepspeed 0.18.2 · torch 2.5.1 · CUDA 12.1 · Python 3.12 · ubuntu-22.04](matrix/" \
           "results/deepspeed-0.18.2-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64/" in block
    assert "8 more combinations (the resolver's best per framework, torch and CUDA) only " \
           "resolve (T0)" in block


def test_evidence_links_are_relative_to_each_file(table, project):
    page = render_markdown(table, project / "docs" / "compatibility.md")
    block = render_readme_block(table, project / "README.md", project / "docs" / "c.md")
    data = json.loads(render_json(table, project))
    paths = [rec["path"] for row in data["rows"] for rec in row["evidence"]["records"]]
    assert len(paths) == 8 and len(set(paths)) == 8  # 9 records; an old T3 failure under T4
    for path in paths:
        assert (project / path).is_file()
        assert path.startswith("matrix/results/")
        site = "evidence/" + path.removeprefix("matrix/results/")
        assert f"]({site} " in page
    assert "](../matrix" not in page and "](evidence/" not in block
    assert block.count("](matrix/results/") == 2  # the best proven of deepspeed, megatron-core
    assert Path("docs/c.md").as_posix() in block


def test_a_citation_with_several_urls_links_each(facts):
    several = FakeUpstream("colossalai", "2.5", "https://a.example/ci.yml#L3 ; "
                           "https://b.example/notes.html")
    table = build_table(facts, [], [several])
    page = _without_anchors(render_markdown(table, Path("docs/compatibility.md")))
    line = next(x for x in page.splitlines() if x.startswith("| colossalai 0.4.6 | 2.5.1 |"))
    assert '[ci](https://a.example/ci.yml#L3 "' in line
    assert "[ci 2](https://b.example/notes.html)" in line
