"""Fixtures the unit tests share: the fixture matrix extended with the os-package flavor's data
(a Debian toolkit per OS), once per module."""

from __future__ import annotations

import pytest
from support.os_package_env import extend_for_os_package

from envgen.facts import load_facts


@pytest.fixture(scope="module")
def os_matrix(tmp_path_factory):
    return extend_for_os_package(tmp_path_factory.mktemp("osmatrix") / "matrix")


@pytest.fixture(scope="module")
def ofacts(os_matrix):
    return load_facts(os_matrix)
