"""Build context, build hash and the build-log follower: pure parts of `envgen build`."""

from __future__ import annotations

import io
import tarfile
from types import SimpleNamespace

import pytest

from envgen.errors import UsageError
from envgen.image.build import names_for
from envgen.image.buildlog import BuildFailed, _follow
from envgen.image.context import build_hash, context_files, context_tar, read_ca_certs
from envgen.image.engines import _sdk_lines
from envgen.lock.manifest import ImageSection

PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.fixture
def lock_dir(tmp_path):
    d = tmp_path / "lock"
    (d / "image").mkdir(parents=True)
    (d / "Dockerfile").write_text("FROM x\nRUN --mount=type=cache,target=/c "
                                  "--mount=type=secret,id=envgen-ca \\\n"
                                  "    CC=cc CCACHE_DIR=/c make\n")
    (d / ".dockerignore").write_text("*\n!image/\n")
    (d / "envgen.lock.json").write_text('{"lock_hash": "sha256:1"}\n')
    (d / "image" / "base.lock.txt").write_text("a==1\n")
    (d / "image" / "portable-flags").write_text("-march=native -march=x86-64-v3\n")
    (d / "requirements.lock.txt").write_text("a==1\n")
    return d


def _names(tar_bytes: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_context_is_dockerfile_and_image_only(lock_dir):
    assert [p.as_posix() for p in context_files(lock_dir)] == [
        "Dockerfile", "image/base.lock.txt", "image/portable-flags"]


def test_context_tar_is_deterministic_and_classic_drops_mounts(lock_dir):
    a = context_tar(lock_dir, classic=True)
    assert a == context_tar(lock_dir, classic=True)
    # the cache and secret mounts go; ccache keeps its objects only in envgen's store (the
    # ENVGEN_CCACHE build arg), writing none locally, and without the arg it is not used
    assert _names(a)["Dockerfile"] == (
        b"FROM x\nRUN CC=cc CCACHE_DIR=${ENVGEN_CCACHE:+/tmp/envgen-ccache} "
        b"CCACHE_REMOTE_STORAGE=${ENVGEN_CCACHE:-} CCACHE_REMOTE_ONLY=true "
        b"CCACHE_NOSTATS=true make\n")
    assert b"--mount" in _names(context_tar(lock_dir, classic=False))["Dockerfile"]


def test_ca_certs_are_a_secret_never_in_the_context_or_the_hash(lock_dir, tmp_path):
    ca = tmp_path / "corp.pem"
    ca.write_bytes(PEM)
    other = tmp_path / "other.pem"
    other.write_bytes(PEM.replace(b"MIIB", b"MIIC").rstrip(b"\n"))  # no final newline
    before = build_hash(lock_dir)
    assert read_ca_certs((ca, other)) == PEM + PEM.replace(b"MIIB", b"MIIC")
    assert PEM not in context_tar(lock_dir, classic=True)
    assert build_hash(lock_dir) == before


def test_ca_cert_with_the_classic_engine_is_refused(tmp_path):
    from envgen.image.build import plan_build
    from envgen.image.engines import BuildOptions

    ca = tmp_path / "corp.pem"
    ca.write_bytes(PEM)
    with pytest.raises(UsageError, match="--ca-cert needs --engine buildkit") as err:
        plan_build(tmp_path, BuildOptions(ca_certs=(ca,), engine="sdk"))
    assert "would stay in a layer" in err.value.hint


@pytest.mark.parametrize("name", ["Dockerfile", "envgen.lock.json", "image/base.lock.txt"])
def test_build_hash_covers_dockerfile_manifest_and_image_files(lock_dir, name):
    before = build_hash(lock_dir)
    (lock_dir / name).write_text((lock_dir / name).read_text() + "# changed\n")
    assert build_hash(lock_dir) != before


def test_build_hash_ignores_files_outside_the_context(lock_dir):
    before = build_hash(lock_dir)
    (lock_dir / "requirements.lock.txt").write_text("b==2\n")  # covered via the manifest
    assert build_hash(lock_dir) == before


def test_bad_ca_cert(tmp_path):
    bad = tmp_path / "x.pem"
    bad.write_text("nope")
    with pytest.raises(UsageError, match="holds no PEM certificate"):
        read_ca_certs((bad,))
    with pytest.raises(UsageError, match=r"missing\.pem"):
        read_ca_certs((tmp_path / "missing.pem",))


def test_follow_prints_steps_and_returns_the_image():
    lines = []
    stream = [{"stream": "Step 1/2 : FROM x\n"}, {"stream": " ---> abc\n"},
              {"stream": "Step 2/2 : RUN make\n"}, {"stream": "\x1b[91mwarning\x1b[0m\n"},
              {"aux": {"ID": "sha256:feed"}}, {"stream": "Successfully built feed\n"}]
    assert _follow(_sdk_lines(stream), lines.append) == "sha256:feed"
    assert lines[0] == "[ 1/2] FROM x" and lines[2] == "[ 2/2] RUN make"
    assert lines[1].startswith("  done in ")


def test_a_full_disk_is_the_daemons_problem_not_the_recipes():
    """Evidence runs must not record a full disk as a broken combination: exit 4, not 1."""
    from envgen.errors import DaemonError

    error = ("Error processing tar file(exit status 1): write /opt/env/lib/libcublasLt.so.11: "
             "no space left on device")
    stream = [{"stream": "Step 25/34 : COPY --from=pruned /opt/env /opt/env\n"},
              {"errorDetail": {"message": error}, "error": error}]
    with pytest.raises(DaemonError) as exc:
        _follow(_sdk_lines(stream), lambda _m: None)
    assert exc.value.exit_code == 4 and "ran out of disk space at step 25/34" in exc.value.message
    assert "docker system df" in exc.value.hint


def test_follow_reports_the_failing_step_with_the_tail():
    stream = [{"stream": "Step 1/3 : FROM x\n"}, {"stream": "Step 2/3 : RUN pip install y\n"},
              {"stream": "ERROR: No matching distribution found for y\n"},
              {"errorDetail": {"message": "The command returned a non-zero code: 1"},
               "error": "The command returned a non-zero code: 1"}]
    with pytest.raises(BuildFailed) as exc:
        _follow(_sdk_lines(stream), lambda _m: None)
    assert exc.value.message == ("the build failed at step 2/3 (RUN pip install y): "
                                 "The command returned a non-zero code: 1")
    assert exc.value.tail[-1] == "ERROR: No matching distribution found for y"
    assert "No matching distribution" in exc.value.report


def test_names_need_an_image_lock():
    with pytest.raises(UsageError, match="made without --image"):
        names_for(SimpleNamespace(image=None), None)
    image = ImageSection(dockerfile="Dockerfile", base="b", repository="envgen/deepspeed",
                         tag="t")
    name = names_for(SimpleNamespace(image=image), "reg:5000/x")
    assert name.ref() == "reg:5000/x/deepspeed:t"


def test_follow_heartbeat_and_verbose_log(monkeypatch):
    import envgen.image.buildlog as buildlog

    monkeypatch.setattr(buildlog, "HEARTBEAT", 0.0)
    said, logged = [], []
    stream = [{"stream": "Step 1/1 : RUN make\n"}, {"stream": "compiling a.cu\n"},
              {"aux": {"ID": "sha256:feed"}}]
    assert _follow(_sdk_lines(stream), said.append, logged.append) == "sha256:feed"
    assert any(line.startswith("  … ") and "compiling a.cu" in line for line in said)
    assert logged == ["Step 1/1 : RUN make", "compiling a.cu"]


def test_build_args_and_labels_are_in_the_build_hash_but_not_max_jobs_or_proxies(lock_dir):
    """One content tag must never name two images: what changes the image changes the
    hash (an arch list given as a build arg, a label); how fast or through what proxy it is
    built does not."""
    from envgen.image.context import build_hash, build_inputs

    plain = build_hash(lock_dir)
    assert build_hash(lock_dir, build_inputs({}, {})) == plain
    assert build_hash(lock_dir, build_inputs({"MAX_JOBS": "16", "HTTPS_PROXY": "http://p:3128",
                                              "no_proxy": "localhost"})) == plain
    archs = build_hash(lock_dir, build_inputs({"TORCH_CUDA_ARCH_LIST": "8.0;9.0"}))
    assert archs != plain
    assert build_hash(lock_dir, build_inputs({"TORCH_CUDA_ARCH_LIST": "9.0"})) != archs
    assert build_hash(lock_dir, build_inputs(labels={"io.envgen.table-row": "u"})) != plain


def test_follow_shows_buildkit_steps_that_run_and_counts_the_cached_ones():
    """BuildKit names every step, cached or not (in any order), then "#N CACHED": only the
    steps that run are shown, each timed from its header; the cached ones are counted."""
    said = []
    log = ["#4 [builder 1/3] FROM docker.io/local/debian:bookworm", "#4 DONE 0.0s",
           "#6 [builder 3/3] RUN make", "#5 [builder 2/3] COPY a /a",
           "#5 sha256:" + "c9" * 32, "#5 CACHED",
           "#6 0.512 compiling", "#6 DONE 3.1s", "#7 [runtime 2/2] COPY --from=builder /a /a",
           "#7 CACHED"]
    lines = [("log", line) for line in log] + [("id", "sha256:feed")]
    assert _follow(iter(lines), said.append) == "sha256:feed"
    steps = [line for line in said if line.startswith("[")]
    assert steps == ["[ 1/3] FROM docker.io/local/debian:bookworm", "[ 3/3] RUN make"]
    assert said[-1] == "  (2 steps cached)"
