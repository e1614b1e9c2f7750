from __future__ import annotations

import pytest

from envgen.errors import UsageError
from envgen.versions import dotted_key, python_key, spec_contains, version_matcher


@pytest.mark.parametrize(
    ("value", "yes", "no"),
    [
        ("2.5", ["2.5.0", "2.5.1"], ["2.4.1", "2.6.0", "2.50.0"]),
        ("2.5.1", ["2.5.1"], ["2.5.0", "2.5.10"]),
        (">=2.4,<2.6", ["2.4.0", "2.5.1"], ["2.6.0", "2.3.1"]),
        ("2", ["2.0.0", "2.9.1"], ["1.13.1", "3.0.0"]),
    ],
)
def test_version_matcher(value, yes, no):
    match = version_matcher("--torch", value)
    assert all(match(v) for v in yes)
    assert not any(match(v) for v in no)


@pytest.mark.parametrize("bad", ["", "two", ">=x", "=>2"])
def test_version_matcher_rejects_with_option_named(bad):
    with pytest.raises(UsageError, match="--torch"):
        version_matcher("--torch", bad)


def test_spec_contains_empty_means_any():
    assert spec_contains("", "0.0.1")
    assert not spec_contains("<2.12", "2.12.0")


def test_keys():
    assert dotted_key("535.104.05") > dotted_key("525.60.13")
    assert python_key("3.13t") == (3, 13, True)
    with pytest.raises(ValueError):
        python_key("py3")
