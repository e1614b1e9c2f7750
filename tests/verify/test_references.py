"""The references the Megatron-Core op check compares its compiled helpers with, pinned to
hand-worked cases (the CPU integration test then holds them against the real helpers)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from envgen import inside


@pytest.fixture
def checks_megatron(monkeypatch):
    """The check module as the target imports it: a top-level module beside checks_common."""
    monkeypatch.syspath_prepend(str(inside.path("checks_common.py").parent))
    return importlib.import_module("checks_megatron_core")


def test_sample_starts_every_seq_length_tokens(checks_megatron):
    # documents of 3, 5 and 2 tokens: samples of 4 (+1 label token) have boundaries at
    # tokens 0, 4 and 8, as (position in the order, offset in that document)
    sizes = np.array([3, 5, 2], dtype=np.int32)
    got = checks_megatron.sample_idx_reference(np, sizes, np.array([0, 1, 2]), 4)
    assert got.tolist() == [[0, 0], [1, 1], [2, 0]]


def test_sample_index_follows_the_document_order(checks_megatron):
    sizes = np.array([3, 5, 2], dtype=np.int32)
    # order 2, 0, 1 concatenates 2 + 3 + 5 tokens: token 4 is at offset 2 of the second
    # document in that order, token 8 at offset 3 of the third
    got = checks_megatron.sample_idx_reference(np, sizes, np.array([2, 0, 1]), 4)
    assert got.tolist() == [[0, 0], [1, 2], [2, 3]]


def test_last_partial_sample_is_dropped(checks_megatron):
    sizes = np.array([9], dtype=np.int32)  # (9 - 1) // 4 = 2 samples: 3 boundaries
    got = checks_megatron.sample_idx_reference(np, sizes, np.array([0]), 4)
    assert got.tolist() == [[0, 0], [0, 4], [0, 8]]


def test_blending_keeps_each_dataset_at_its_share(checks_megatron):
    index, sample = checks_megatron.blending_reference(np, np.array([0.5, 0.5]), 4)
    assert index.tolist() == [0, 1, 0, 1] and sample.tolist() == [0, 0, 1, 1]
    index, _ = checks_megatron.blending_reference(np, np.array([0.75, 0.25]), 400)
    assert np.bincount(index).tolist() == [300, 100]
