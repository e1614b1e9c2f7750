"""The compatibility table: exact output against goldens for the fixture matrix + records,
and the README block replaced without touching a byte outside its markers.

Regenerate the goldens after an intended change with
    ENVGEN_UPDATE_GOLDEN=1 pytest tests/results/test_results_table.py
"""

from __future__ import annotations

import json
import os
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
    latest_releases,
    render_json,
    render_markdown,
    render_readme_block,
    replace_block,
    untested_candidates,
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
    assert text.startswith(f"<!-- {HEADER} -->\n")
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
        "deepspeed-0.16.4-torch2.5.1-cu121-py3.11-debian12-x86_64",
        "megatron-core-0.12.0-torch2.5.1-cu121-py3.12-ubuntu22.04-x86_64",
        "colossalai-0.4.6-torch2.5.1-cu124-py3.12-ubuntu22.04-x86_64",
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
    assert all(r.status == "untested" and r.evidence is None
               for r in table.rows if not r.records)
    assert table.summary == {"known-good": 2, "known-bad": 1, "untested": 12}


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


def test_no_records_gives_only_untested_rows(facts, tmp_path):
    table = build_table(facts, [])
    assert table.summary == {"known-good": 0, "known-bad": 0, "untested": 14}
    block = render_readme_block(table, tmp_path / "README.md", tmp_path / "docs" / "c.md")
    assert "No verification results yet." in block
    assert "14 more combinations (the resolver's best per framework, torch and CUDA) are " \
           "untested; see the [full table](docs/c.md)." in block


def test_evidence_links_are_relative_to_each_file(table, project):
    page = render_markdown(table, project / "docs" / "compatibility.md")
    block = render_readme_block(table, project / "README.md", project / "docs" / "c.md")
    data = json.loads(render_json(table, project))
    for row in data["rows"]:
        if row["evidence"]:
            assert (project / row["evidence"]).is_file()
            assert f"](../{row['evidence']})" in page and f"]({row['evidence']})" in block
    assert Path("docs/c.md").as_posix() in block
