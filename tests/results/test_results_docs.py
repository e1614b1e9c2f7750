"""The docs site builds with `mkdocs build --strict`: as committed, and with a table whose
evidence links point at the records the site's hook (docs/hooks/evidence.py) publishes under
evidence/ — every link resolves, so mkdocs.yml reports a missing one as a warning (an error
under --strict)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from results_data import ATTEMPTS, REPO
from support.run import run_envgen

from envgen.results import build_table, load
from envgen.results.table import HEADER
from envgen.results.table_render import render_json, render_markdown

_NOT_FOUND = re.compile(r"contains a link '([^']*)', but the target (?:'[^']*' )?is not found")


def mkdocs_build(config: Path, site: Path, *, ok: bool = True) -> tuple[list[str], str]:
    """Build strictly; the links mkdocs could not find, and its output."""
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(config), "--site-dir", str(site)],
                          capture_output=True, text=True, timeout=120, check=False)
    output = proc.stderr + proc.stdout
    assert (proc.returncode == 0) is ok, output
    return _NOT_FOUND.findall(output), output


def _site_source(root: Path) -> None:
    """The repository's docs site source (mkdocs.yml, docs/ with its hook) copied to ``root``,
    next to which a matrix/results/ may sit, as in the repository."""
    (root / "docs").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    for page in (REPO / "docs").iterdir():  # the table's page and JSON: written by the test
        if page.is_file() and page.name not in ("compatibility.md", "compatibility.json"):
            shutil.copy(page, root / "docs" / page.name)
    for folder in ("hooks", "js", "css"):
        shutil.copytree(REPO / "docs" / folder, root / "docs" / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))


def test_mkdocs_config_validates_links_and_registers_the_hook():
    text = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    links = text[text.index("  links:"):]
    assert re.search(r"^    not_found: warn$", links, re.MULTILINE)
    assert "  - docs/hooks/evidence.py" in text


def test_committed_docs_build_strictly(tmp_path):
    missing, _ = mkdocs_build(REPO / "mkdocs.yml", tmp_path / "site")
    assert missing == []
    page = (tmp_path / "site" / "compatibility" / "index.html").read_text(encoding="utf-8")
    assert "<h1" in page and "Compatibility" in page
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert 'href="compatibility/"' in index
    assert (tmp_path / "site" / "compatibility.json").is_file()
    assert not (tmp_path / "site" / "hooks").exists()  # the hook is not published


def test_committed_table_files_carry_the_generated_header():
    page = (REPO / "docs" / "compatibility.md").read_text(encoding="utf-8")
    assert page.startswith(f"---\nhide:\n  - toc\n---\n<!-- {HEADER} -->\n")
    data = (REPO / "docs" / "compatibility.json").read_text(encoding="utf-8")
    assert data.startswith('{\n  "generated": "' + HEADER.replace('"', '\\"') + '",')


def test_docs_with_evidence_links_build_strictly(facts, project, tmp_path):
    _site_source(project)
    table = build_table(facts, load(project / "matrix" / "results"))
    page = project / "docs" / "compatibility.md"
    page.write_text(render_markdown(table, page), encoding="utf-8")
    (project / "docs" / "compatibility.json").write_text(render_json(table, project))
    site = tmp_path / "site"
    missing, _ = mkdocs_build(project / "mkdocs.yml", site)
    assert missing == []
    html = (site / "compatibility" / "index.html").read_text(encoding="utf-8")
    links = re.findall(r'href="\.\./(evidence/[^"]+\.json)"', html)
    assert len(links) == 8  # the records shown: each row's proof and what failed
    for link in links:
        published = site / link
        stored = project / "matrix" / "results" / link.removeprefix("evidence/")
        assert published.read_bytes() == stored.read_bytes()
    # every record is published, shown or not
    assert len(list((site / "evidence").rglob("*.json"))) == len(
        list((project / "matrix" / "results").rglob("*.json")))


def test_a_link_to_a_record_that_is_not_there_fails_the_build(facts, project, tmp_path):
    _site_source(project)
    table = build_table(facts, load(project / "matrix" / "results"))
    page = project / "docs" / "compatibility.md"
    page.write_text(render_markdown(table, page), encoding="utf-8")
    (project / "docs" / "compatibility.json").write_text(render_json(table, project))
    gone = next((project / "matrix" / "results").glob("colossalai-*cu121*/*.json"))
    gone.unlink()
    missing, output = mkdocs_build(project / "mkdocs.yml", tmp_path / "site", ok=False)
    assert missing == [f"evidence/{gone.parent.name}/{gone.name}"], output


@pytest.mark.integration
def test_table_write_then_mkdocs_build_publishes_the_linked_record(fixture_matrix, tmp_path,
                                                                   monkeypatch):
    """`envgen table --write` with one attempt record in a results dir, then `mkdocs build
    --strict` of a copy of the site source: the page's evidence link target is in site/."""
    root = tmp_path / "checkout"
    _site_source(root)
    (root / "README.md").write_text("# demo\n\n<!-- envgen:table:start -->\n"
                                    "<!-- envgen:table:end -->\n", encoding="utf-8")
    monkeypatch.chdir(root)
    env = {**os.environ, "ENVGEN_MATRIX_DIR": str(fixture_matrix)}
    attempt = next(p for p in ATTEMPTS if p.stem == "megatron-t2-build-pass")
    added = run_envgen("results", "add", str(attempt), "--results-dir", "matrix/results",
                       "--json", env=env)
    assert added.returncode == 0, added.stderr
    (out,) = json.loads(added.stdout)
    assert (out["kind"], out["tier"], out["status"], out["added"]) == (
        "attempt", "T2", "pass", True)
    proc = run_envgen("table", "--write", "--results-dir", "matrix/results", env=env)
    assert proc.returncode == 0, proc.stderr
    page = (root / "docs" / "compatibility.md").read_text(encoding="utf-8")
    (link,) = re.findall(r"\]\((evidence/[^ )]+\.json) ", page)
    assert link == f"evidence/{out['path'].removeprefix('matrix/results/')}"
    site = tmp_path / "site"
    missing, _ = mkdocs_build(root / "mkdocs.yml", site)
    assert missing == []
    html = (site / "compatibility" / "index.html").read_text(encoding="utf-8")
    assert f'href="../{link}"' in html
    assert (site / link).read_bytes() == (root / out["path"]).read_bytes()
    data = json.loads((root / "docs" / "compatibility.json").read_text(encoding="utf-8"))
    (row,) = [r for r in data["rows"] if r["evidence"]["records"]]
    assert row["evidence"]["records"][0]["path"] == out["path"]
    assert (row["tier"], row["flavor"], data["summary"]["T2"]) == ("T2", "conda", 1)
