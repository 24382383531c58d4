"""Batches from worker processes through shared memory (hybrid.data._shared_batches)."""
import gc
import os

import jax
import numpy as np
import pytest

from hybrid import data
from hybrid.data import _shared_batches

pytestmark = pytest.mark.skipif(_shared_batches.new_prefix() is None, reason="needs a writable /dev/shm (Linux)")


class Images(data.Dataset):
    """Deterministic float32 images large enough for a batch to go through shared memory."""

    def __len__(self):
        return 10

    def __getitem__(self, i):
        return np.full((3, 32, 32), i, np.float32) + np.arange(32, dtype=np.float32), np.int32(i)


def _files(prefix):
    return [name for name in os.listdir(_shared_batches.SHM_DIR) if name.startswith(prefix)]


def test_a_round_trip_keeps_values_and_nesting_and_leaves_no_file():
    prefix = _shared_batches.new_prefix()
    big = np.arange(2 ** 15, dtype=np.float32).reshape(8, -1)
    batch = {"x": (big, np.arange(3)), "names": ["a", "b"]}
    shared = _shared_batches.share(batch, prefix)
    assert isinstance(shared["x"][0], _shared_batches.SharedArray)
    assert isinstance(shared["x"][1], np.ndarray)  # small arrays travel as they are
    assert len(_files(prefix)) == 1
    back = _shared_batches.collect(shared)
    np.testing.assert_array_equal(back["x"][0], big)
    np.testing.assert_array_equal(back["x"][1], np.arange(3))
    assert back["names"] == ["a", "b"]
    assert not back["x"][0].flags.writeable
    assert _files(prefix) == []  # unlinked as soon as it is mapped


def test_the_mapped_batch_reaches_jax_without_a_copy_on_the_cpu():
    prefix = _shared_batches.new_prefix()
    mapped = _shared_batches.collect(_shared_batches.share(np.ones((64, 1024), np.float32), prefix))
    on_device = jax.device_put(mapped)
    if jax.default_backend() == "cpu":
        assert np.shares_memory(np.asarray(on_device), mapped)
    del mapped
    gc.collect()
    assert float(on_device.sum()) == 64 * 1024  # the mapping lives as long as the array


def test_without_shared_memory_the_array_travels_as_it_is(monkeypatch):
    monkeypatch.setattr(_shared_batches, "SHM_DIR", "/nonexistent-directory")
    big = np.ones(2 ** 16, np.float32)
    assert _shared_batches.share(big, "hybrid-batch-test-") is big


def test_worker_batches_equal_the_main_process_batches_and_leave_no_files():
    dataset = Images()
    expected = [(np.asarray(x), np.asarray(y)) for x, y in data.DataLoader(dataset, batch_size=4)]
    loader = data.DataLoader(dataset, batch_size=4, num_workers=2)
    for _ in range(2):
        got = [(np.asarray(x), np.asarray(y)) for x, y in loader]
        assert len(got) == len(expected)
        for (x, y), (ex, ey) in zip(got, expected):
            np.testing.assert_array_equal(x, ex)
            np.testing.assert_array_equal(y, ey)
    prefix = loader._shm_prefix
    assert prefix is not None
    assert _files(prefix) == []
    for x, _ in loader:
        break  # batches made ahead of the step are never collected
    loader.close()
    del loader, x
    gc.collect()
    assert _files(prefix) == []
