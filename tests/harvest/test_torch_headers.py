"""torch's own statement of the C++ standard and compiler minimums, read from its wheels
(envgen.harvest.torch_headers): pure tests on real header lines, and the harvest wiring over
the loopback index.

The snippets below are real lines of the real files, placed at their real line numbers
(:func:`at`), from these PyPI wheels:

* 1.13.1: https://files.pythonhosted.org/packages/00/86/77a9eddbf46f1bca2468d16a401911f58917f95b63402d6a7a4522521e5d/torch-1.13.1-cp37-cp37m-manylinux1_x86_64.whl
* 2.5.1: https://files.pythonhosted.org/packages/2a/ef/834af4a885b31a0b32fff2d80e1e40f771e1566ea8ded55347502440786a/torch-2.5.1-cp310-cp310-manylinux1_x86_64.whl
* 2.15.0: https://files.pythonhosted.org/packages/06/7d/57b7f46934e1148b436889e385693bfcb94ae047b3fe0b6015922e3b66f7/torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl
"""

from __future__ import annotations

import json

import pytest

from envgen.harvest.torch_headers import (
    ALL_H,
    ATEN_H,
    CPP_EXTENSION,
    CXX17_H,
    FACT_KEYS,
    guarded_errors,
    header_facts,
)

OLD_GCC = (
    '    "You\'re trying to build PyTorch with a too old version of GCC. We need GCC {} or later."'
)
OLD_CLANG = (
    "    \"You're trying to build PyTorch with a too old version of Clang. We need Clang {} or "
    'later."'
)
STABLE_ONLY = "#if !defined(TORCH_STABLE_ONLY) && !defined(TORCH_TARGET_VERSION)"
NOT_STABLE = (
    '#error "This file should not be included when either TORCH_STABLE_ONLY or '
    'TORCH_TARGET_VERSION is defined."'
)


def at(lines: dict[int, str]) -> bytes:
    """A file holding each line at its real line number (blank lines between)."""
    last = max(lines)
    return "\n".join(lines.get(n, "") for n in range(1, last + 1)).encode() + b"\n"


def _cxx17_h(first: int, gcc: int, clang: int, std: str, name: int) -> bytes:
    """c10/util/C++17.h's three guards (1.13.1 from line 14, 2.5.1 from line 11)."""
    return at({
        first: "#if !defined(__clang__) && !defined(_MSC_VER) && defined(__GNUC__) && \\",
        first + 1: f"    __GNUC__ < {gcc}",
        first + 2: "#error \\",
        first + 3: OLD_GCC.format(gcc),
        first + 4: "#endif",
        first + 6: f"#if defined(__clang__) && __clang_major__ < {clang}",
        first + 7: "#error \\",
        first + 8: OLD_CLANG.format(clang),
        first + 9: "#endif",
        first + 11: "#if (defined(_MSC_VER) && (!defined(_MSVC_LANG) || _MSVC_LANG < "
        f"{std}L)) || \\",
        first + 12: f"    (!defined(_MSC_VER) && __cplusplus < {std}L)",
        first + 13: f"#error You need C++{name} to compile PyTorch",
        first + 14: "#endif",
    })  # fmt: skip


TORCH_1_13 = {
    CXX17_H: _cxx17_h(14, 5, 4, "201402", 14),
    ALL_H: at({
        3: "#if !defined(_MSC_VER) && __cplusplus < 201402L",
        4: "#error C++14 or later compatible compiler is required to use PyTorch.",
        5: "#endif",
    }),
    CPP_EXTENSION: at({
        45: "MINIMUM_GCC_VERSION = (5, 0, 0)",
        46: "MINIMUM_MSVC_VERSION = (19, 0, 24215)",
        432: "    minimum required compiler flags (e.g. ``-std=c++14``) as well as mixed",
        541: "            cpp_flag = cpp_flag_prefix + 'c++14'",
        2007: "        cflags = common_cflags + ['-fPIC', '-std=c++14'] + extra_cflags",
    }),
}  # fmt: skip

TORCH_2_5 = {
    CXX17_H: _cxx17_h(11, 9, 9, "201703", 17),
    ATEN_H: at({
        3: "#if !defined(_MSC_VER) && __cplusplus < 201703L",
        4: "#error C++17 or later compatible compiler is required to use ATen.",
        5: "#endif",
    }),
    CPP_EXTENSION: at({
        45: "MINIMUM_GCC_VERSION = (5, 0, 0)",
        66: "MINIMUM_CLANG_VERSION = (3, 3, 0)",
        456: "    minimum required compiler flags (e.g. ``-std=c++17``) as well as mixed",
        564: "            cpp_flag = cpp_flag_prefix + 'c++17'",
        1480: "    common_cflags += ['-std=c++17', '-fPIC']",
    }),
}  # fmt: skip

# 2.15.0: C++17.h has no guard left (and is wrapped in a TORCH_STABLE_ONLY #else #error);
# ATen.h and all.h ask for C++20; cpp_extension.py passes -std=c++20.
TORCH_2_15 = {
    CXX17_H: at({
        1: STABLE_ONLY,
        2: "#pragma once",
        3: "#ifndef C10_UTIL_CPP17_H_",
        39: "#endif // C10_UTIL_CPP17_H_",
        41: "#else",
        42: NOT_STABLE,
        43: "#endif  // !defined(TORCH_STABLE_ONLY) && !defined(TORCH_TARGET_VERSION)",
    }),
    ATEN_H: at({
        1: STABLE_ONLY,
        2: "#pragma once",
        4: "// MSVC keeps __cplusplus at 199711L unless /Zc:__cplusplus is passed, so check",
        7: "#if (defined(_MSVC_LANG) && _MSVC_LANG < 202002L) || \\",
        8: "    (!defined(_MSVC_LANG) && __cplusplus < 202002L)",
        9: "#error C++20 or later compatible compiler is required to use ATen.",
        10: "#endif",
        43: "#else",
        44: NOT_STABLE,
        45: "#endif  // !defined(TORCH_STABLE_ONLY) && !defined(TORCH_TARGET_VERSION)",
    }),
    ALL_H: at({
        7: "#if (defined(_MSVC_LANG) && _MSVC_LANG < 202002L) || \\",
        8: "    (!defined(_MSVC_LANG) && __cplusplus < 202002L)",
        9: "#error C++20 or later compatible compiler is required to use PyTorch.",
        10: "#endif",
    }),
    CPP_EXTENSION: at({
        53: "MINIMUM_GCC_VERSION = (5, 0, 0)",
        54: "MINIMUM_MSVC_VERSION = (19, 20, 0)",
        85: "MINIMUM_CLANG_VERSION = (3, 3, 0)",
        796: "    minimum required compiler flags (e.g. ``-std=c++20``) as well as mixed",
        928: "            cpp_flag = cpp_flag_prefix + 'c++20'",
        1740: "        ...                 extra_compile_args={'cxx': ['-g', '-std=c++20', "
        "'-fPIC']})",
    }),
}  # fmt: skip


def test_1_13_needs_cxx14_gcc5_clang4():
    facts = header_facts(TORCH_1_13)
    assert set(facts) == set(FACT_KEYS)
    assert facts["cxx_std"] == "14"
    assert facts["cxx_std_where"] == (
        "torch/include/c10/util/C++17.h:25: #if (defined(_MSC_VER) && (!defined(_MSVC_LANG) || "
        "_MSVC_LANG < 201402L)) || (!defined(_MSC_VER) && __cplusplus < 201402L)"
    )
    assert (facts["min_gcc"], facts["min_clang"]) == (5, 4)
    assert facts["min_gcc_where"] == (
        "torch/include/c10/util/C++17.h:14: #if !defined(__clang__) && !defined(_MSC_VER) && "
        "defined(__GNUC__) && __GNUC__ < 5"
    )
    assert facts["min_clang_where"] == (
        "torch/include/c10/util/C++17.h:20: #if defined(__clang__) && __clang_major__ < 4"
    )
    assert facts["extension_std"] == "14"
    assert facts["extension_std_where"] == (
        "torch/utils/cpp_extension.py:541: cpp_flag = cpp_flag_prefix + 'c++14'"
    )
    assert facts["extension_min_gcc"] == "5.0.0"
    assert facts["extension_min_gcc_where"] == (
        "torch/utils/cpp_extension.py:45: MINIMUM_GCC_VERSION = (5, 0, 0)"
    )
    assert facts["extension_min_clang"] is None and facts["extension_min_clang_where"] is None
    assert facts["members"] == sorted([CXX17_H, ALL_H, CPP_EXTENSION])


def test_2_5_needs_cxx17_gcc9_clang9():
    facts = header_facts(TORCH_2_5)
    assert (facts["cxx_std"], facts["min_gcc"], facts["min_clang"]) == ("17", 9, 9)
    # the same standard in C++17.h and ATen.h: C++17.h, first in HEADERS, is cited
    assert facts["cxx_std_where"].startswith("torch/include/c10/util/C++17.h:22: #if ")
    assert facts["min_gcc_where"].startswith("torch/include/c10/util/C++17.h:11: ")
    assert (facts["extension_std"], facts["extension_min_gcc"], facts["extension_min_clang"]) == (
        "17",
        "5.0.0",
        "3.3.0",
    )
    assert facts["extension_min_clang_where"] == (
        "torch/utils/cpp_extension.py:66: MINIMUM_CLANG_VERSION = (3, 3, 0)"
    )


def test_2_15_needs_cxx20_and_states_no_compiler_minimum():
    facts = header_facts(TORCH_2_15)
    assert facts["cxx_std"] == "20"
    assert facts["cxx_std_where"] == (
        "torch/include/ATen/ATen.h:7: #if (defined(_MSVC_LANG) && _MSVC_LANG < 202002L) || "
        "(!defined(_MSVC_LANG) && __cplusplus < 202002L)"
    )
    assert facts["min_gcc"] is None and facts["min_clang"] is None  # the #else errors say nothing
    assert facts["min_gcc_where"] is None
    assert facts["extension_std"] == "20"
    assert facts["extension_std_where"].startswith("torch/utils/cpp_extension.py:928: ")
    assert facts["extension_min_gcc_where"].startswith("torch/utils/cpp_extension.py:53: ")
    assert facts["members"] == sorted(TORCH_2_15)
    json.dumps(facts)  # JSON-able


def test_no_members_no_facts():
    facts = header_facts({"torch/__init__.py": b""})
    assert facts == {**dict.fromkeys(FACT_KEYS), "members": []}


def test_guarded_errors_follow_the_branches():
    text = "\n".join([
        "#ifdef FOO",  # 1
        "#error foo",  # 2
        "#elif __cplusplus <= 201703L",  # 3
        "#  error needs newer",  # 4
        "#else",  # 5
        "#error not counted",  # 6
        "#endif",  # 7
        "#if A /* comment */ && \\",  # 8
        "    B // tail",  # 9
        "#if C",  # 10
        "#endif",  # 11
        "#error \\",  # 12
        '    "split message"',  # 13
        "#endif",  # 14
        "#error top level, not counted",  # 15
    ])  # fmt: skip
    found = [(g.line, g.condition, g.message, g.error_line) for g in guarded_errors(text)]
    assert found == [
        (1, "defined(FOO)", "foo", 2),
        (3, "__cplusplus <= 201703L", "needs newer", 4),
        (8, "A && B", '"split message"', 12),
    ]


@pytest.mark.parametrize(
    ("condition", "std"),
    [
        ("__cplusplus < 201402L", "14"),
        ("__cplusplus <= 201703L", "20"),  # 201703 itself is refused: C++20 is needed
        ("__cplusplus < 201709L", "20"),  # a pre-standard value: the standard that meets it
        ("__cplusplus < 202302L", "23"),
    ],
)
def test_cplusplus_values(condition, std):
    facts = header_facts({ATEN_H: f"#if {condition}\n#error x\n#endif\n".encode()})
    assert facts["cxx_std"] == std


def test_extension_std_ignores_comments_and_doc_examples():
    doc_only = at({
        1: "    minimum required compiler flags (e.g. ``-std=c++17``) as well as mixed",
        2: "        ...    extra_compile_args={'cxx': ['-g', '-std=c++20', '-fPIC']})",
        3: "    # cflags += ['-std=c++14']",
        4: "    >>> flags = ['-std=c++11']",
    })  # fmt: skip
    assert header_facts({CPP_EXTENSION: doc_only})["extension_std"] is None
    fallback = doc_only + b"    common_cflags += ['-std=c++17', '-fPIC']\n"
    facts = header_facts({CPP_EXTENSION: fallback})
    assert facts["extension_std"] == "17"
    assert facts["extension_std_where"] == (
        "torch/utils/cpp_extension.py:5: common_cflags += ['-std=c++17', '-fPIC']"
    )


# -- the harvest: one wheel per release, over the loopback index ---------------------------

T214 = "torch-2.14.0-{py}-{py}-manylinux_2_28_x86_64.whl"
AARCH64 = "torch-2.14.0-cp312-cp312-manylinux_2_28_aarch64.whl"


def _add_release(index_server, members):
    from support.mini_pypi import add_wheel, fixture

    meta = fixture("torch-2.12.0-cp312-manylinux_2_28_x86_64.METADATA").replace(
        "Version: 2.12.0", "Version: 2.14.0"
    )
    for name in (AARCH64, T214.format(py="cp313"), T214.format(py="cp312")):
        add_wheel(index_server, "torch", name, meta, extra_members=members)


def _builds(result, version):
    torch = json.loads(result.texts["torch.json"])["builds"]
    return [b for b in torch if b["version"] == version]


@pytest.mark.integration
def test_harvest_reads_one_wheel_per_release_by_range(mini_matrix, index_server, fast):
    from envgen.harvest.update import UpdateOptions, update_matrix

    _add_release(index_server, TORCH_2_15)
    lines: list[str] = []
    result = update_matrix(mini_matrix, UpdateOptions(**fast), progress=lines.append)
    builds = _builds(result, "2.14.0")
    # two records: x86_64 (cp312 + cp313, grouped) and aarch64; both get the same headers
    assert sorted((b["platform"], tuple(b["python"])) for b in builds) == [
        ("linux-aarch64", ("3.12",)),
        ("linux-x86_64", ("3.12", "3.13")),
    ]
    headers = builds[0]["headers"]
    assert all(b["headers"] == headers for b in builds)
    assert {k: headers[k] for k in FACT_KEYS} == header_facts(TORCH_2_15)
    source = headers["source"]
    # x86_64 first, then the oldest Python
    assert source["url"].endswith("/files/" + T214.format(py="cp312"))
    assert (source["verified"], source["retrieved"], source["index"]) == (
        "range",
        "2026-11-21",
        "pypi",
    )
    assert set(source) == {"url", "sha256", "uploaded", "retrieved", "index", "verified"}
    # the cp313 wheel is never touched (its metadata comes from its .metadata file); the cp312
    # x86_64 wheel (headers, and that record's GPU archs) and the aarch64 wheel (its record's
    # GPU archs) only by Range requests: the tail, then the wanted members
    log = index_server.state.log
    assert not [p for p, _ in log if p == "/files/" + T214.format(py="cp313")]
    for wheel in (T214.format(py="cp312"), AARCH64):
        hits = [h for p, h in log if p == f"/files/{wheel}"]
        assert hits and all(h.get("Range", "").startswith("bytes=") for h in hits)
    assert any(line.startswith("torch (pypi): header files:") for line in lines)
    # a release whose wheels carry none of the files: read, but nothing stated
    other = _builds(result, "2.5.1")[0]["headers"]
    assert other["members"] == [] and other["cxx_std"] is None and other["source"]["url"]


@pytest.mark.integration
def test_headers_are_cached_and_read_offline(mini_matrix, index_server, fast):
    from envgen.harvest.update import UpdateOptions, update_matrix

    _add_release(index_server, TORCH_2_5)
    online = update_matrix(mini_matrix, UpdateOptions(**fast))
    offline = update_matrix(mini_matrix, UpdateOptions(offline=True, **fast))
    assert offline.texts["torch.json"] == online.texts["torch.json"]
    assert _builds(offline, "2.14.0")[0]["headers"]["min_gcc"] == 9


@pytest.mark.integration
@pytest.mark.parametrize("fault", ["404", "corrupt"])
def test_unreadable_wheel_gives_null_headers(mini_matrix, index_server, fast, fault):
    from envgen.harvest.update import UpdateOptions, update_matrix

    _add_release(index_server, TORCH_2_15)
    path = "/files/" + T214.format(py="cp312")
    if fault == "404":
        index_server.state.raw[path] = (404, b"gone", {})
    else:
        index_server.state.substitute[path] = b"<html>502 Bad Gateway</html>" * 50
    lines: list[str] = []
    result = update_matrix(mini_matrix, UpdateOptions(**fast), progress=lines.append)
    builds = _builds(result, "2.14.0")
    assert builds and all(b["headers"] is None for b in builds)
    assert all(b["cuda"] == "13.0" for b in builds)  # the rest of the record is intact
    assert _builds(result, "2.5.1")[0]["headers"] is not None  # other releases unaffected
    [warning] = [line for line in lines if line.startswith("warning: torch headers")]
    assert path in warning and "headers: null" in warning


@pytest.mark.integration
def test_tampered_wheel_below_the_limit_still_stops_the_refresh(whole_matrix, index_server, fast):
    """A wheel downloaded whole whose bytes do not match the index's sha256 is not 'unreadable':
    the refresh stops, as for every other file."""
    from envgen.errors import HarvestError
    from envgen.harvest.update import UpdateOptions, update_matrix

    _add_release(index_server, TORCH_2_15)
    path = "/files/" + T214.format(py="cp312")
    index_server.state.substitute[path] = b"<html>502 Bad Gateway</html>" * 50
    with pytest.raises(HarvestError, match="sha256 mismatch"):
        update_matrix(whole_matrix, UpdateOptions(**fast))
