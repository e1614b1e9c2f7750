"""The newest host clang nvcc accepts (``max_clang`` in cuda.json), read from the same
``crt/host_config.h`` as ``max_gcc``.

Real lines of real headers, at their real line numbers:

* 11.7: nvidia/cuda_nvcc/include/crt/host_config.h of
  https://files.pythonhosted.org/packages/1f/a7/d37d77d06166a0c7fae31d8baaf119c60570a77d3da0dafd7f05e6ba6464/nvidia_cuda_nvcc_cu11-11.7.99-py3-none-manylinux1_x86_64.whl
* 13.0: nvidia/cu13/include/crt/host_config.h of
  https://files.pythonhosted.org/packages/05/69/a1ec4d9f0747d85964206feb47bf359f48a2d6af74c0add8abba6efe3dda/nvidia_cuda_crt-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl
* 12.1 and 12.9: the captured whole headers in fixtures/ (see fixtures/README.md).
"""

from __future__ import annotations

import json

import pytest
from support.mini_pypi import fixture

from envgen.harvest.cuda_toolkits import CACHE_MEMBER, max_clang, max_gcc

TAIL = (
    " The nvcc flag '-allow-unsupported-compiler' can be used to override this version check; "
    "however, using an unsupported host compiler may cause compilation failure or incorrect run "
    "time execution. Use at your own risk."
)
CLANG_IF = (
    "#if (__clang_major__ >= {n}) || (__clang_major__ < 3) || ((__clang_major__ == 3) &&  "
    "(__clang_minor__ < 3))"
)
CLANG_ENDIF = (
    "#endif  /* (__clang_major__ >=  {n}) || (__clang_major__ < 3) || ((__clang_major__ == 3) "
    "&&  (__clang_minor__ < 3)) */"
)
GENERIC = (
    "#if defined(__clang__) && !defined(__ibmxl_vrm__) && !defined(__ICC) && "
    "!defined(__HORIZON__) && !defined(__APPLE__)"
)


def at(lines: dict[int, str]) -> bytes:
    """A file holding each line at its real line number (blank lines between)."""
    return "\n".join(lines.get(n, "") for n in range(1, max(lines) + 1)).encode() + b"\n"


CUDA_11_7 = at({
    128: "#if defined(__GNUC__)",
    130: "#if __GNUC__ > 11",
    132: "#error -- unsupported GNU version! gcc versions later than 11 are not supported!" + TAIL,
    134: "#endif /* __GNUC__ > 11 */",
    137: GENERIC,
    139: CLANG_IF.format(n=14),
    140: "#error -- unsupported clang version! clang version must be less than 14 and greater "
    "than 3.2 ." + TAIL,
    142: CLANG_ENDIF.format(n=14),
    144: f"#endif /* {GENERIC[4:]} */",
})  # fmt: skip

CUDA_13_0 = at({
    133: "#if defined(__GNUC__)",
    135: "#if __GNUC__ > 15",
    137: "#error -- unsupported GNU version! gcc versions later than 15 are not supported!" + TAIL,
    139: "#endif /* __GNUC__ > 15 */",
    142: "#if defined(__HORIZON__)",
    143: CLANG_IF.format(n=21),
    144: "#error -- unsupported HOS clang version! The version must be must be less than 21 and "
    "greater than 3.2 ." + TAIL,
    145: CLANG_ENDIF.format(n=21),
    146: "#endif /* __HORIZON__  */",
    148: GENERIC + " && !defined(__GRCO_CLANG_COMPILER__)",
    150: CLANG_IF.format(n=21),
    151: "#error -- unsupported clang version! clang version must be less than 21 and greater "
    "than 3.2 ." + TAIL,
    153: CLANG_ENDIF.format(n=21),
    155: f"#endif /* {GENERIC[4:]} && !defined(__GRCO_CLANG_COMPILER__) */",
    158: "#endif /* __GNUC__ */",
})  # fmt: skip


@pytest.mark.parametrize(
    ("header", "gcc", "clang"),
    [
        (CUDA_11_7, 11, 13),
        (fixture("host_config-12.1.105.h").encode(), 12, 15),
        (fixture("host_config-12.9.86.h").encode(), 14, 19),
        (CUDA_13_0, 15, 20),
    ],
    ids=["11.7", "12.1", "12.9", "13.0"],
)
def test_max_clang_beside_max_gcc(header, gcc, clang):
    assert (max_gcc(header), max_clang(header)) == (gcc, clang)


def test_only_the_generic_clang_check_counts():
    """Grace and HOS clang have their own limits; only ``unsupported clang version!`` counts."""
    text = fixture("host_config-12.9.86.h")
    other = text.replace("(__clang_major__ > 19)", "(__clang_major__ > 40)")  # Grace
    other = other.replace(
        "#if defined(__HORIZON__)\n#if (__clang_major__ >= 20)",
        "#if defined(__HORIZON__)\n#if (__clang_major__ >= 30)",
    )
    assert "__clang_major__ > 40" in other and "__clang_major__ >= 30" in other
    assert max_clang(other.encode()) == 19


def test_no_clang_check_is_none():
    assert max_clang(b"#if __GNUC__ > 12\n#error -- unsupported GNU version!\n#endif\n") is None
    # a check with `>` rather than `>=`: that version itself is still accepted
    gt = b"#if __clang_major__ > 16\n#error -- unsupported clang version!\n#endif\n"
    assert max_clang(gt) == 16


@pytest.mark.integration
def test_harvest_writes_max_clang_and_ignores_old_cache_entries(mini_matrix, index_server, fast):
    from envgen.harvest.update import UpdateOptions, update_matrix

    assert CACHE_MEMBER == "nvcc-facts-v4.json"
    # a v3 entry (no max_clang) for the 12.9 wheel: not reused
    served = index_server.state.files[
        "/files/nvidia_cuda_nvcc_cu12-12.9.86-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
    ]
    old = fast["cache_dir"] / "blobs" / served.sha256[:2] / served.sha256 / "nvcc-facts-v3.json"
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps({"max_gcc": 99, "archs": ["sm_1"], "verified": "range"}))
    result = update_matrix(mini_matrix, UpdateOptions(**fast))
    cuda = json.loads(result.texts["cuda.json"])["toolkits"]
    # 13.0's limits come from the nvidia-cuda-crt companion (in the mini index: the 12.9 header)
    assert [(c["cuda"], c["max_gcc"], c["max_clang"]) for c in cuda] == [
        ("12.1", 12, 15),
        ("12.9", 14, 19),
        ("13.0", 15, 19),
    ]
