"""Tests ported from Apache MXNet's tests/python/unittest/test_gluon_data.py (master, Gluon 2.0).

Datasets used by worker processes are defined at module level: workers receive them by pickle
(porting-from-gluon.md, gluon.data: DataLoader).
"""
import random

import jax
import numpy as np

from hybrid import data
from hybrid.data import ArrayDataset, DataLoader, Dataset

from conftest import assert_close


def test_array_dataset():
    """Port of test_gluon_data.py::test_array_dataset (apache/mxnet master)."""
    X = np.random.uniform(size=(10, 20))
    Y = np.random.uniform(size=(10,))
    dataset = data.ArrayDataset(X, Y)
    loader = data.DataLoader(dataset, 2)
    for i, (x, y) in enumerate(loader):
        assert_close(np.asarray(x), X[i * 2:(i + 1) * 2])
        assert_close(np.asarray(y), Y[i * 2:(i + 1) * 2])

    dataset = data.ArrayDataset(X)
    loader = data.DataLoader(dataset, 2)
    for i, x in enumerate(loader):
        assert_close(np.asarray(x), X[i * 2:(i + 1) * 2])


def test_sampler():
    """Port of the first test_gluon_data.py::test_sampler (apache/mxnet master; the second
    definition of that name shadows it there)."""
    seq_sampler = data.SequentialSampler(10)
    assert list(seq_sampler) == list(range(10))
    rand_sampler = data.RandomSampler(10)
    assert sorted(list(rand_sampler)) == list(range(10))
    seq_batch_keep = data.BatchSampler(seq_sampler, 3, "keep")
    assert sum(list(seq_batch_keep), []) == list(range(10))
    seq_batch_discard = data.BatchSampler(seq_sampler, 3, "discard")
    assert sum(list(seq_batch_discard), []) == list(range(9))
    rand_batch_keep = data.BatchSampler(rand_sampler, 3, "keep")
    assert sorted(sum(list(rand_batch_keep), [])) == list(range(10))


def test_interval_sampler():
    """Port of the second test_gluon_data.py::test_sampler (apache/mxnet master)."""
    interval_sampler = data.IntervalSampler(10, 3)
    assert sorted(list(interval_sampler)) == list(range(10))
    interval_sampler = data.IntervalSampler(10, 3, rollover=False)
    assert list(interval_sampler) == [0, 3, 6, 9]


def test_list_dataset():
    """Port of test_gluon_data.py::test_list_dataset (apache/mxnet master)."""
    for num_worker in range(0, 3):
        loader = data.DataLoader([([1, 2], 0), ([3, 4], 1)], batch_size=1, num_workers=num_worker)
        for _ in loader:
            pass
        loader.close()


class _Dataset(data.Dataset):
    def __len__(self):
        return 100

    def __getitem__(self, key):
        return np.full((10,), key)


def test_multi_worker():
    """Port of test_gluon_data.py::test_multi_worker (apache/mxnet master)."""
    dataset = _Dataset()
    for thread_pool in [True, False]:
        loader = data.DataLoader(dataset, batch_size=1, num_workers=5, thread_pool=thread_pool)
        for i, batch in enumerate(loader):
            assert (np.asarray(batch) == i).all()
        loader.close()


def test_multi_worker_shape():
    """Port of test_gluon_data.py::test_multi_worker_shape (apache/mxnet master)."""
    for thread_pool in [True, False]:
        batch_size = 1024
        shape = (batch_size + 1, 11, 12)
        dataset = ArrayDataset(np.ones(shape))
        loader = data.DataLoader(dataset, batch_size=batch_size, num_workers=5, last_batch="keep",
                                 thread_pool=thread_pool)
        for batch in loader:
            if shape[0] > batch_size:
                assert batch.shape == (batch_size, shape[1], shape[2])
                shape = (shape[0] - batch_size, shape[1], shape[2])
            else:
                assert batch.shape == shape
        loader.close()


class _Dummy(Dataset):
    """Samples of random (or fixed) shapes."""

    def __init__(self, random_shape):
        self.random_shape = random_shape

    def __getitem__(self, idx):
        key = idx
        if self.random_shape:
            out = np.random.uniform(size=(random.randint(1000, 1100), 40))
            labels = np.random.uniform(size=(random.randint(10, 15)))
        else:
            out = np.random.uniform(size=(1000, 40))
            labels = np.random.uniform(size=(10))
        return key, out, labels

    def __len__(self):
        return 50


def _batchify_list(samples):
    """The samples as a list, without stacking or padding."""
    if isinstance(samples, (tuple, list)):
        return list(samples)
    if isinstance(samples, np.ndarray):
        return [samples]
    return samples


def _batchify(samples):
    """Pads inputs and labels to the longest sample; time-major (TNC) inputs and their lengths."""
    inputs, labels = [item[1] for item in samples], [item[2] for item in samples]
    if len(samples) > 1:
        max_data_len = max([seq.shape[0] for seq in inputs])
        max_labels_len = 0 if not labels else max([seq.shape[0] for seq in labels])
    else:
        max_data_len = inputs[0].shape[0]
        max_labels_len = 0 if not labels else labels[0].shape[0]

    x_lens = [item.shape[0] for item in inputs]
    y_lens = [item.shape[0] for item in labels]

    for i, seq in enumerate(inputs):
        pad_len = max_data_len - seq.shape[0]
        inputs[i] = np.pad(seq, ((0, pad_len), (0, 0)), "constant", constant_values=0)
        labels[i] = np.pad(labels[i], (0, max_labels_len - labels[i].shape[0]), "constant", constant_values=-1)

    inputs = np.asarray(inputs, dtype=np.float32)
    if labels is not None:
        labels = np.asarray(labels, dtype=np.float32)
    inputs = inputs.transpose((1, 0, 2))
    labels = labels.transpose((1, 0))

    return (inputs, np.array(x_lens)) if labels is None else (
        inputs, np.array(x_lens), labels, np.array(y_lens))


def test_multi_worker_forked_data_loader():
    """Port of test_gluon_data.py::test_multi_worker_forked_data_loader (apache/mxnet master); the
    batchify function returns NumPy arrays where the original makes ``cpu_shared`` NDArrays."""
    loader = DataLoader(_Dummy(False), batch_size=40, batchify_fn=_batchify, num_workers=2)
    for _ in range(1):
        for _ in loader:
            pass
    loader.close()

    loader = DataLoader(_Dummy(True), batch_size=40, batchify_fn=_batchify_list, num_workers=2)
    for _ in range(1):
        for _ in loader:
            pass
    loader.close()


def test_multi_worker_dataloader_release_pool():
    """Port of test_gluon_data.py::test_multi_worker_dataloader_release_pool (apache/mxnet master),
    with a 999x20 array instead of 999x2000 (each loader sends it to its 8 workers)."""
    for _ in range(10):
        A = np.random.rand(999, 20)
        D = data.DataLoader(A, batch_size=8, num_workers=8)
        the_iter = iter(D)
        next(the_iter)
        del the_iter
        del D


def test_dataloader_context():
    """Port of test_gluon_data.py::test_dataloader_context (apache/mxnet master).

    Documented differences applied (porting-from-gluon.md: placement follows JAX's default device;
    DataLoader's ``pin_memory``/``pin_device_id`` are accepted without effect): every batch is on
    the default device, pinned or not."""
    X = np.random.uniform(size=(10, 20))
    dataset = data.ArrayDataset(X)
    default_device = jax.devices()[0]

    loader1 = data.DataLoader(dataset, 8)
    for _, x in enumerate(loader1):
        assert x.devices() == {default_device}

    loader2 = data.DataLoader(dataset, 8, pin_memory=True)
    for _, x in enumerate(loader2):
        assert x.devices() == {default_device}

    loader3 = data.DataLoader(dataset, 8, pin_memory=True, pin_device_id=1)
    for _, x in enumerate(loader3):
        assert x.devices() == {default_device}


def batchify(a):
    return a


def test_dataset_filter():
    """Port of test_gluon_data.py::test_dataset_filter (apache/mxnet master)."""
    length = 100
    a = data.SimpleDataset([i for i in range(length)])
    a_filtered = a.filter(lambda x: x % 10 == 0)
    assert len(a_filtered) == 10
    for sample in a_filtered:
        assert sample % 10 == 0
    a_xform_filtered = a.transform(lambda x: x + 1).filter(lambda x: x % 10 == 0)
    assert len(a_xform_filtered) == 10
    for sample in a_xform_filtered:
        assert sample % 10 == 0


def test_dataset_shard():
    """Port of test_gluon_data.py::test_dataset_shard (apache/mxnet master)."""
    length = 9
    a = data.SimpleDataset([i for i in range(length)])
    shard_0 = a.shard(4, 0)
    shard_1 = a.shard(4, 1)
    shard_2 = a.shard(4, 2)
    shard_3 = a.shard(4, 3)
    assert len(shard_0) + len(shard_1) + len(shard_2) + len(shard_3) == length
    assert len(shard_0) == 3
    assert len(shard_1) == 2
    assert len(shard_2) == 2
    assert len(shard_3) == 2
    total = 0
    for shard in [shard_0, shard_1, shard_2, shard_3]:
        for sample in shard:
            total += sample
    assert total == sum(a)


def test_dataset_take():
    """Port of test_gluon_data.py::test_dataset_take (apache/mxnet master)."""
    length = 100
    a = data.SimpleDataset([i for i in range(length)])
    a_take_full = a.take(1000)
    assert len(a_take_full) == length
    a_take_full = a.take(None)
    assert len(a_take_full) == length
    count = 10
    a_take_10 = a.take(count)
    assert len(a_take_10) == count
    expected_total = sum([i for i in range(count)])
    total = 0
    for sample in a_take_10:
        assert sample < count
        total += sample
    assert total == expected_total

    a_xform_take_10 = a.transform(lambda x: x * 10).take(count)
    assert len(a_xform_take_10) == count
    expected_total = sum([i * 10 for i in range(count)])
    total = 0
    for sample in a_xform_take_10:
        assert sample < count * 10
        total += sample
    assert total == expected_total


def test_dataloader_scope():
    """Port of test_gluon_data.py::test_dataloader_scope (apache/mxnet master)."""
    args = {"num_workers": 1, "batch_size": 2}
    dataset = np.ones(5)
    iterator = iter(DataLoader(dataset, batchify_fn=batchify, **args))
    item = next(iterator)
    assert item is not None


def test_batchify_stack():
    """Port of test_gluon_data.py::test_batchify_stack (apache/mxnet master), without the C++
    ``__mx_handle__`` it compares with."""
    a = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    b = np.array([[5, 6, 7, 8], [1, 2, 3, 4]])
    bf = data.batchify.Stack()
    c = bf([a, b])
    assert c.shape == (2, 2, 4)
    assert_close(np.asarray(c), np.stack((a, b)))


def test_batchify_pad():
    """Port of test_gluon_data.py::test_batchify_pad (apache/mxnet master), without the C++
    ``__mx_handle__`` it compares with."""
    a = np.array([[1, 2, 3, 4], [11, 12, 13, 14]])
    b = np.array([[4, 5, 6]])
    c = np.array([[9, 10]])
    bf = data.batchify.Pad(val=-1)
    d = bf([a, b, c])
    expected = np.array([[[1., 2., 3., 4.], [11., 12., 13., 14.]],
                         [[4., 5., 6., -1.], [-1., -1., -1., -1.]],
                         [[9., 10., -1., -1.], [-1., -1., -1., -1.]]])
    assert_close(np.asarray(d), expected)


def test_batchify_group():
    """Port of test_gluon_data.py::test_batchify_group (apache/mxnet master), without the C++
    ``__mx_handle__`` it compares with."""
    a = [np.array([[1, 2, 3, 4], [5, 6, 7, 8]]), np.array([[1, 2, 3, 4], [11, 12, 13, 14]])]
    b = [np.array([[1, 2, 3, 4], [5, 6, 7, 8]]), np.array([[4, 5, 6]])]
    c = [np.array([[1, 2, 3, 4], [5, 6, 7, 8]]), np.array([[9, 10]])]
    bf = data.batchify.Group(data.batchify.Stack(), data.batchify.Pad(val=-1))
    d = bf([a, b, c])
    assert_close(np.asarray(d[0]), np.stack((a[0], b[0], c[0])))
    expected = np.array([[[1., 2., 3., 4.], [11., 12., 13., 14.]],
                         [[4., 5., 6., -1.], [-1., -1., -1., -1.]],
                         [[9., 10., -1., -1.], [-1., -1., -1., -1.]]])
    assert_close(np.asarray(d[1]), expected)
