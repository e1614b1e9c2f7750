"""An index answering 200 with something that is not the index (a login page, a captive portal,
a text/plain page, a malformed PEP 691 document, a cut-off page, a partial mirror) ends in a
clear error (exit code 4) naming the URL and the reason, and leaves matrix/ byte-for-byte
untouched; --allow-removals is the deliberate way through the removal guard."""

from __future__ import annotations

import json

import pytest
from support.index_server import IndexServer
from support.mini_pypi import add_wheel, make_matrix, tree

from envgen.cli.main import main
from envgen.errors import EnvironmentProblem, HarvestError
from envgen.harvest import snapshot
from envgen.harvest.update import RemovalsRefused, UpdateOptions, update_matrix

pytestmark = pytest.mark.integration

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
LOGIN_PAGE = b"""<!DOCTYPE html><html><head><title>Sign in - Corporate Web Proxy</title></head>
<body><h1>Authentication required</h1>
<form method="post" action="/login"><input name="user"><input type="password" name="pw">
<button>Sign in</button></form>
<a href="/help">Help</a> <a href="/static/terms.pdf">Terms</a>
<a href="https://proxy.example/forgot">Forgot your password?</a>
</body></html>"""


def _refused(matrix, fast, err_type=HarvestError, **options):
    """Run a writing update that must fail; the error, after checking matrix/ is untouched."""
    before = tree(matrix)
    with pytest.raises(err_type) as err:
        update_matrix(matrix, UpdateOptions(write=True, **{**fast, **options}))
    assert err.value.exit_code == 4 and isinstance(err.value, EnvironmentProblem)
    assert tree(matrix) == before
    assert not list(matrix.glob(".harvested*"))
    return err.value


def test_login_page_is_refused(committed, index_server, fast):
    index_server.state.raw["/simple/torch/"] = (200, LOGIN_PAGE, {"Content-Type": "text/html"})
    err = _refused(committed, fast)
    assert err.message.startswith(f"{index_server.url}/simple/torch/: not a project page of torch")
    assert "no torch wheel or sdist among its 3 links" in err.message
    assert "'Sign in - Corporate Web Proxy'" in err.message and "1 form" in err.message
    assert "redirected" not in err.message
    assert "log in" in err.hint and "--index NAME=URL" in err.hint


def test_captive_portal_redirect_is_refused(committed, index_server, fast):
    with IndexServer() as portal:  # another host:port on loopback
        portal.state.raw["/login"] = (200, LOGIN_PAGE, {"Content-Type": "text/html; charset=utf-8"})
        index_server.state.raw["/simple/deepspeed/"] = (
            302, b"", {"Location": f"{portal.url}/login"}
        )
        err = _refused(committed, fast)
    assert err.message.startswith(f"{index_server.url}/simple/deepspeed/: not a project page")
    assert "no deepspeed wheel or sdist among its 3 links" in err.message
    assert f"redirected to {portal.url}/login" in err.message


def test_text_plain_page_is_refused(committed, index_server, fast):
    body = b"torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl\ntorch-2.12.0.tar.gz\n"
    index_server.state.raw["/simple/torch/"] = (200, body, {"Content-Type": "text/plain"})
    err = _refused(committed, fast)
    assert err.message.startswith(f"{index_server.url}/simple/torch/: not an index page")
    assert "Content-Type 'text/plain'" in err.message and f"{len(body)} bytes" in err.message


def test_html_page_of_another_project_is_refused(committed, index_server, fast):
    """A partial mirror that serves some other project's page (or its root page) here."""
    page = b"".join(
        b'<a href="/files/%s">%s</a>\n' % (name.encode(), name.encode())
        for name in ("numpy-2.0.0-cp311-cp311-manylinux_2_17_x86_64.whl", "numpy-2.0.0.tar.gz")
    )
    index_server.state.raw["/simple/colossalai/"] = (200, page, {"Content-Type": "text/html"})
    err = _refused(committed, fast)
    assert "no colossalai wheel or sdist among its 2 links" in err.message


FILE = {"filename": "torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl",
        "url": "/files/torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl", "hashes": {}}
HEAD = {"meta": {"api-version": "1.1"}, "name": "torch"}


def _doc(*files) -> bytes:
    return json.dumps({**HEAD, "files": list(files)}).encode()


@pytest.mark.parametrize(
    ("doc", "reason"),
    [  # the reasons are pypi-simple's model's (pydantic), with the field named
        (b"[]", "Input should be a valid dictionary or instance of Project"),
        (json.dumps(HEAD).encode(), "files: Field required"),
        (json.dumps({**HEAD, "files": {"a": 1}}).encode(), "files: Input should be a valid list"),
        (b'{"files": []}', "name: Field required; meta: Field required"),
        (_doc(FILE["filename"]), "files[0]: Input should be a valid dictionary"),
        (_doc({"filename": FILE["filename"], "hashes": {}}), "files[0].url: Field required"),
        (_doc({**FILE, "url": 5}), "files[0].url: Input should be a valid string"),
        (_doc({**FILE, "hashes": ["sha256", "ab"]}),
         "files[0].hashes: Input should be a valid dictionary"),
        (_doc({**FILE, "hashes": {"sha256": 5}}),
         "files[0].hashes.sha256: Input should be a valid string"),
        (_doc({**FILE, "core-metadata": 3}), "files[0].core-metadata.bool: Input should be"),
        (_doc({**FILE, "requires-python": [">=3.8"]}),
         "files[0].requires-python: Input should be a valid string"),
        (_doc({**FILE, "upload-time": "yesterday"}),
         "files[0].upload-time: Input should be a valid datetime"),
        (_doc(FILE, 7), "files[1]: Input should be a valid dictionary"),
        (b'{"files": [{"url": "/files/t', "invalid JSON"),
    ],
)
def test_pep691_page_of_the_wrong_shape_is_refused(committed, index_server, fast, doc, reason):
    index_server.state.raw["/simple/torch/"] = (200, doc, {"Content-Type": JSON_TYPE})
    err = _refused(committed, fast)
    assert err.message.startswith(
        f"{index_server.url}/simple/torch/: not a PEP 691 project page ("
    )
    assert reason in err.message


def test_pep691_page_without_a_project_file_is_refused(committed, index_server, fast):
    doc = {**HEAD, "files": [{"filename": "index.html", "url": "/index.html", "hashes": {}}]}
    index_server.state.raw["/simple/torch/"] = (
        200, json.dumps(doc).encode(), {"Content-Type": JSON_TYPE}
    )
    err = _refused(committed, fast)
    assert "not a project page of torch: no torch wheel or sdist among its 1 files" in err.message


def test_empty_project_page_is_refused(committed, index_server, fast):
    index_server.state.projects["/simple/nvidia-cuda-nvcc-cu11/"] = []
    err = _refused(committed, fast)
    assert err.message.startswith(f"{index_server.url}/simple/nvidia-cuda-nvcc-cu11/: the page")
    assert "lists no files at all" in err.message and "partial mirror" in err.hint


def test_empty_html_page_is_refused(committed, index_server, fast):
    index_server.state.raw["/simple/megatron-core/"] = (
        200, b"<html><body></body></html>", {"Content-Type": "text/html"}
    )
    err = _refused(committed, fast)
    assert "/simple/megatron-core/: the page of megatron-core on index 'pypi' lists no files" in (
        err.message
    )


def test_refused_page_is_not_cached(committed, index_server, fast):
    from envgen.harvest.cache import Cache
    from envgen.harvest.simple_index import ACCEPT

    url = f"{index_server.url}/simple/torch/"
    index_server.state.raw["/simple/torch/"] = (200, LOGIN_PAGE, {"Content-Type": "text/html"})
    _refused(committed, fast)
    assert Cache(fast["cache_dir"]).cached_page(url, ACCEPT) is None
    del index_server.state.raw["/simple/torch/"]
    result = update_matrix(committed, UpdateOptions(**fast))
    page = Cache(fast["cache_dir"]).cached_page(url, ACCEPT)
    assert result.changes == 0 and page is not None and page.url == url


def test_adhoc_index_without_the_project_is_skipped(committed, index_server, fast):
    with IndexServer() as extra:  # a second index holding only torch
        for served in index_server.state.projects["/simple/torch/"][:3]:
            extra.state.add("/simple/torch/", served)
        extra.state.projects["/simple/deepspeed/"] = []  # an empty page: skipped too
        result = update_matrix(
            committed, UpdateOptions(indexes=[f"extra={extra.url}/simple/"], **fast)
        )
    assert "extra" in result.indexes
    assert all("[extra]" in k for k in result.diff["files"]["torch.json"]["added"])


def _cut_torch_page(index_server) -> None:
    """A PEP 503 page cut off in transit (a complete 200 answer, fewer anchors)."""
    index_server.state.html_only = True
    index_server.state.faults["/simple/torch/"] = ["cut:0.45"]


def test_truncated_html_page_is_caught_by_the_removal_guard(committed, index_server, fast):
    _cut_torch_page(index_server)
    err = _refused(committed, fast, RemovalsRefused)
    assert err.message.startswith(
        f"refusing this refresh of pypi ({index_server.url}/simple/): it would remove "
    )
    assert "of the 5 torch.json records harvested from these indexes" in err.message
    assert "max_removed_share is 5%" in err.message and "matrix/harvested is unchanged" in (
        err.message
    )
    assert "--allow-removals" in err.hint
    assert err.source.endswith("sources.toml:refresh.max_removed_share")
    removed = err.diff["files"]["torch.json"]["removed"]
    assert removed and "  - " + removed[0] in err.report
    payload = err.to_dict()
    assert payload["kind"] == "index" and payload["diff"]["files"]["torch.json"]["removed"] == (
        removed
    )


def _partial_mirror(index_server) -> None:
    """Half of the torch and deepspeed files are missing, as on a half-synced mirror."""
    for page in ("/simple/torch/", "/simple/deepspeed/"):
        files = sorted(index_server.state.projects[page], key=lambda f: f.filename)
        index_server.state.projects[page] = files[: len(files) // 2]


def test_partial_mirror_is_caught_by_the_removal_guard(committed, index_server, fast):
    _partial_mirror(index_server)
    err = _refused(committed, fast, RemovalsRefused)
    assert "torch.json records" in err.message and "frameworks.json records" in err.message
    # a dry run is refused the same way (nothing would be written anyway)
    with pytest.raises(RemovalsRefused):
        update_matrix(committed, UpdateOptions(**fast))


def test_allow_removals_writes_and_shows_the_removals(committed, index_server, fast):
    _partial_mirror(index_server)
    before = json.loads((committed / "harvested" / "torch.json").read_text())["builds"]
    result = update_matrix(committed, UpdateOptions(write=True, allow_removals=True, **fast))
    assert result.written
    removed = result.diff["files"]["torch.json"]["removed"]
    after = json.loads((committed / "harvested" / "torch.json").read_text())["builds"]
    assert removed and len(after) == len(before) - len(removed)
    assert "deepspeed 0.8.0" in result.diff["files"]["frameworks.json"]["removed"]


def _cli(matrix, fast, *extra):
    return main(["matrix", "update", "--matrix-dir", str(matrix), "--cache-dir",
                 str(fast["cache_dir"]), "--timeout", "2", "--retries", "1", *extra])


def test_cli_removal_guard_and_allow_removals(committed, index_server, fast, capsys):
    _partial_mirror(index_server)
    before = tree(committed)
    assert _cli(committed, fast, "--write") == 4
    err = capsys.readouterr().err
    assert "torch.json: +0 -" in err and "  - torch 2." in err  # the diff, before the error
    assert "error: refusing this refresh" in err and "--allow-removals" in err
    assert tree(committed) == before
    assert _cli(committed, fast, "--write", "--allow-removals") == 0
    out = capsys.readouterr().out
    assert "  - deepspeed 0.8.0" in out and "wrote " in out


def test_emptying_a_file_is_refused_whatever_the_share(tmp_path, index_server, fast):
    matrix = make_matrix(tmp_path / "lenient", index_server.url, max_removed_share=1.0)
    update_matrix(matrix, UpdateOptions(write=True, **fast))
    for project, name in (
        ("nvidia-cuda-nvcc-cu12", "nvidia_cuda_nvcc_cu12-12.9.86-py3-none-win_amd64.whl"),
        ("nvidia-cuda-nvcc", "nvidia_cuda_nvcc-13.0.88-py3-none-win_amd64.whl"),
    ):
        page = f"/simple/{project}/"
        index_server.state.projects[page] = []
        add_wheel(index_server, project, name, f"Name: {project}\nVersion: 1\n")
    err = _refused(matrix, fast, RemovalsRefused)
    assert "it would leave cuda.json with no records (it has 3)" in err.message
    assert "cuda.json: +0 -3 ~0" in err.report


def test_records_of_other_indexes_are_never_removed(committed, index_server, fast):
    """Only indexes harvested in a run can lose records: pytorch-cu121's survive a pypi run."""
    update_matrix(committed, UpdateOptions(write=True, indexes=["pytorch-cu121"], **fast))
    cu121 = [b for b in snapshot.load(committed)["torch.json"]["builds"]
             if b["index"] == "pytorch-cu121"]
    assert cu121
    result = update_matrix(committed, UpdateOptions(**fast))
    assert result.changes == 0
    assert '"index": "pytorch-cu121"' in result.texts["torch.json"]
