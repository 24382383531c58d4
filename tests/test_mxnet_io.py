"""``mx.io`` against MXNet 1.9.1: NDArrayIter's last-batch modes, shuffle and inputs, ResizeIter,
PrefetchingIter, DataDesc/DataBatch, CSVIter (round_batch, dmlc-core's number parsing) and MNISTIter (its
shuffle, parts, flat), epoch after epoch; then the errors bad input gets.

The scenarios are ``fixtures/mxnet_io/cases.py``; MXNet's results were saved by its ``make_fixtures.py``.
"""
import gzip
import json
import os
import struct
import threading

import numpy as np
import pytest

import hybrid.mxnet as mx
from helpers import fixture_module

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "mxnet_io")
cases = fixture_module("mxnet_io")

ARRAYS = np.load(os.path.join(HERE, "results.npz"))
with open(os.path.join(HERE, "results.json")) as f:
    VALUES = json.load(f)


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    return cases.write_inputs(str(tmp_path_factory.mktemp("mxnet_io")))


@pytest.mark.parametrize("case", sorted(cases.CASES))
def test_case_gives_mxnets_batches(case, paths):
    results = {k: (v if isinstance(v, np.ndarray) else cases._plain(v)) for k, v in cases.CASES[case](mx, paths).items()}
    expected_names = {k.split("/", 1)[1] for k in list(ARRAYS.files) + list(VALUES) if k.startswith(case + "/")}
    assert set(results) == expected_names
    for name, value in results.items():
        key = f"{case}/{name}"
        if key in ARRAYS.files:
            expected = ARRAYS[key]
            assert isinstance(value, np.ndarray), key
            assert value.dtype == expected.dtype and value.shape == expected.shape, (key, value.dtype, value.shape,
                                                                                     expected.dtype, expected.shape)
            np.testing.assert_array_equal(value, expected, err_msg=key)   # bit for bit: the same float32s
        else:
            assert value == VALUES[key], (key, value, VALUES[key])


def test_batches_hold_ndarray_handles(paths):
    batch = mx.io.NDArrayIter(np.ones((4, 2)), np.zeros(4), batch_size=2).next()
    assert all(type(x) is mx.nd.NDArray for x in batch.data + batch.label)
    batch = mx.io.CSVIter(data_csv=paths["data.csv"], data_shape=(4,), batch_size=2).next()
    assert type(batch.data[0]) is mx.nd.NDArray and batch.index.dtype == np.uint64
    assert "io" in dir(mx) and mx.io.NDArrayIter is mx.io.NDArrayIter


def test_a_batch_is_a_copy(paths):
    data = np.arange(8.0).reshape(4, 2)
    it = mx.io.NDArrayIter(data, batch_size=2)
    first = it.next().data[0]
    first[:] = -1
    it.reset()
    np.testing.assert_array_equal(it.next().data[0].asnumpy(), data[:2])
    csv = mx.io.CSVIter(data_csv=paths["data.csv"], data_shape=(4,), batch_size=3, round_batch=False)
    batches = list(csv)                     # MXNet's would share buffers that later batches overwrite
    values = [b.data[0].asnumpy() for b in batches]
    assert len(batches) == 3 and not np.array_equal(values[0], values[1])
    np.testing.assert_array_equal(values[2][1:], values[1][1:])   # the unread rows: the previous batch's


def test_mnist_reads_gzip_files_as_the_plain_ones(paths, tmp_path):
    for name in ("images", "labels"):
        with open(paths[name], "rb") as f, gzip.open(tmp_path / (name + ".gz"), "wb") as g:
            g.write(f.read())
    plain = mx.io.MNISTIter(image=paths["images"], label=paths["labels"], batch_size=5, silent=True).next()
    zipped = mx.io.MNISTIter(image=str(tmp_path / "images.gz"), label=str(tmp_path / "labels.gz"), batch_size=5,
                             silent=True).next()
    np.testing.assert_array_equal(plain.data[0].asnumpy(), zipped.data[0].asnumpy())
    np.testing.assert_array_equal(plain.label[0].asnumpy(), zipped.label[0].asnumpy())


def test_prefetching_reads_ahead_in_another_thread():
    threads = []

    class Recording(mx.io.DataIter):
        def __init__(self):
            super().__init__(1)
            self.provide_data = [mx.io.DataDesc("data", (1,))]
            self.provide_label = []
            self.i = 0

        def next(self):
            threads.append(threading.current_thread())
            self.i += 1
            if self.i > 3:
                raise StopIteration
            return mx.io.DataBatch([mx.nd.ones((1,)) * self.i], [], pad=0)

        def reset(self):
            self.i = 0

    it = mx.io.PrefetchingIter(Recording())
    values = [float(b.data[0].asscalar()) for b in it]
    assert values == [1.0, 2.0, 3.0]
    assert threads and all(t is not threading.main_thread() for t in threads)
    it.reset()
    assert len(list(it)) == 3


def test_datadesc_pickles_and_replaces_with_its_dtype_and_layout():
    import pickle
    desc = mx.io.DataDesc("x", (2, 3), np.int32, "NTC")
    again = pickle.loads(pickle.dumps(desc))
    assert again == desc and again.dtype is np.int32 and again.layout == "NTC"
    assert repr(desc._replace(name="y")) == "DataDesc[y,(2, 3),<class 'numpy.int32'>,NTC]"


def test_a_layout_with_the_batch_axis_second_batches_along_it():
    data = np.arange(2 * 10 * 3, dtype=np.float32).reshape(2, 10, 3)      # (T, N, C)
    it = mx.io.NDArrayIter(data, batch_size=4, layout="TNC", last_batch_handle="discard")
    assert it.provide_data[0].shape == (2, 4, 3)
    batches = [b.data[0].asnumpy() for b in it]
    assert len(batches) == 2
    np.testing.assert_array_equal(batches[1], data[:, 4:8])


# -- errors ------------------------------------------------------------------------------------------------
def test_ndarray_iter_errors_name_the_argument():
    data = np.zeros((10, 3))
    with pytest.raises(ValueError, match=r"label 'softmax_label' has 12 examples .* data 'data' has 10"):
        mx.io.NDArrayIter(data, np.zeros(12), batch_size=4)
    with pytest.raises(ValueError, match=r"data 'b' has 5 examples .* data 'a' has 10"):
        mx.io.NDArrayIter({"a": data, "b": np.zeros(5)}, batch_size=4)
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        mx.io.NDArrayIter(data, batch_size=0)
    with pytest.raises(ValueError, match=r"last_batch_handle must be one of .* got 'drop'"):
        mx.io.NDArrayIter(data, batch_size=4, last_batch_handle="drop")
    with pytest.raises(TypeError, match="data must be an NDArray, a numpy.ndarray, a list of them or a dict"):
        mx.io.NDArrayIter("data.csv", batch_size=4)
    with pytest.raises(ValueError, match="data is empty"):
        mx.io.NDArrayIter([], batch_size=4)
    with pytest.raises(ValueError, match="roll_over' needs batch_size <= the number of examples"):
        mx.io.NDArrayIter(data, batch_size=11, last_batch_handle="roll_over")
    with pytest.raises(ValueError, match="layout must name the batch axis with 'N'"):
        mx.io.NDArrayIter(data, batch_size=4, layout="CHW")
    with pytest.raises(TypeError, match="label 'y' is a object, which does not convert|label 'y' is a"):
        mx.io.NDArrayIter(data, {"y": object()}, batch_size=4)


def test_batch_and_wrapper_errors():
    with pytest.raises(TypeError, match=r"DataBatch: data must be a list of NDArrays, got NDArray \(write data=\[x\]\)"):
        mx.io.DataBatch(mx.nd.ones((2,)))
    with pytest.raises(TypeError, match="DataBatch: label must be a list"):
        mx.io.DataBatch([mx.nd.ones((2,))], label=mx.nd.ones((2,)))
    short, long = mx.io.NDArrayIter(np.zeros((4, 1)), batch_size=2), mx.io.NDArrayIter(np.zeros((6, 1)), batch_size=2)
    fetch = mx.io.PrefetchingIter([short, long])
    with pytest.raises(ValueError, match="ran out at different batches"):
        list(fetch)
    with pytest.raises(ValueError, match="rename_data needs one dict per iterator"):
        mx.io.PrefetchingIter([short, long], rename_data=[{"data": "x"}])
    with pytest.raises(KeyError, match="rename_data has no new name for 'data'"):
        mx.io.PrefetchingIter(short, rename_data=[{"x": "y"}]).provide_data
    with pytest.raises(ValueError, match="PrefetchingIter: iters is empty"):
        mx.io.PrefetchingIter([])


def test_csv_iter_errors_name_the_file_and_argument(paths, tmp_path):
    data = paths["data.csv"]
    with pytest.raises(ValueError, match=r"row 0 of data_csv .* has 4 values but data_shape \(3,\) holds 3"):
        mx.io.CSVIter(data_csv=data, data_shape=(3,), batch_size=2)
    short = tmp_path / "short.csv"
    short.write_text("1\n2\n")
    with pytest.raises(ValueError, match=r"label_csv .*short.csv' has 2 rows, fewer than the 7 rows of data_csv"):
        mx.io.CSVIter(data_csv=data, data_shape=(4,), label_csv=str(short), batch_size=2)
    with pytest.raises(FileNotFoundError, match="CSVIter: no such file or folder for data_csv: 'nope.csv'"):
        mx.io.CSVIter(data_csv="nope.csv", data_shape=(4,), batch_size=2)
    with pytest.raises(TypeError, match="CSVIter takes keyword arguments only"):
        mx.io.CSVIter(data, (4,), batch_size=2)
    with pytest.raises(TypeError, match=r"CSVIter: unknown argument\(s\) \['shufle'\]"):
        mx.io.CSVIter(data_csv=data, data_shape=(4,), batch_size=2, shufle=True)
    with pytest.raises(ValueError, match="CSVIter: dtype must be one of 'float32', 'int32', 'int64', got 'float64'"):
        mx.io.CSVIter(data_csv=data, data_shape=(4,), batch_size=2, dtype="float64")
    with pytest.raises(ValueError, match="CSVIter: batch_size must be a positive int"):
        mx.io.CSVIter(data_csv=data, data_shape=(4,), batch_size=0)
    with pytest.raises(ValueError, match="data_shape must be a non-empty tuple of positive ints"):
        mx.io.CSVIter(data_csv=data, data_shape=(), batch_size=2)
    with pytest.raises(ValueError, match="batch_size=20 needs 13 rows from the start .* data_csv has 7 rows"):
        mx.io.CSVIter(data_csv=data, data_shape=(4,), batch_size=20)
    empty = tmp_path / "empty.csv"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="CSVIter: the input holds no batch"):
        mx.io.CSVIter(data_csv=str(empty), data_shape=(4,), batch_size=2)


def test_mnist_iter_errors_name_the_file_and_argument(paths, tmp_path):
    common = {"image": paths["images"], "label": paths["labels"], "silent": True}
    with pytest.raises(ValueError, match=r"batch_size=50 is larger than the 23 images"):
        mx.io.MNISTIter(batch_size=50, **common)
    with pytest.raises(ValueError, match=r"part_index must be in \[0, num_parts\), got part_index=3, num_parts=3"):
        mx.io.MNISTIter(batch_size=2, num_parts=3, part_index=3, **common)
    with pytest.raises(ValueError, match=r"image .*labels' is not an MNIST idx3-ubyte image file"):
        mx.io.MNISTIter(image=paths["labels"], label=paths["labels"], batch_size=2)
    with pytest.raises(FileNotFoundError, match="MNISTIter: no such label file: 'nope'"):
        mx.io.MNISTIter(image=paths["images"], label="nope", batch_size=2)
    fewer = tmp_path / "fewer"
    fewer.write_bytes(struct.pack(">ii", 2049, 3) + bytes(3))
    with pytest.raises(ValueError, match="holds 23 images but label .*fewer' holds 3 labels"):
        mx.io.MNISTIter(image=paths["images"], label=str(fewer), batch_size=2)
    cut = tmp_path / "cut"
    cut.write_bytes(struct.pack(">iiii", 2051, 10, 28, 28) + bytes(100))
    with pytest.raises(ValueError, match=r"cut' is truncated: its header says \(10, 28, 28\)"):
        mx.io.MNISTIter(image=str(cut), label=paths["labels"], batch_size=2)
    with pytest.raises(TypeError, match="MNISTIter takes keyword arguments only"):
        mx.io.MNISTIter(paths["images"])
    with pytest.raises(ValueError, match="MNISTIter: dtype must be None or 'float32'"):
        mx.io.MNISTIter(batch_size=2, dtype="float16", **common)


def test_reading_past_the_end_says_to_reset(paths):
    it = mx.io.NDArrayIter(np.zeros((4, 1)), batch_size=2)
    assert len(list(it)) == 2 and len(list(it)) == 0
    with pytest.raises(ValueError, match="the epoch is over .* call reset"):
        it.getdata()
    csv = mx.io.CSVIter(data_csv=paths["data.csv"], data_shape=(4,), batch_size=7)
    assert len(list(csv)) == 1 and not csv.iter_next()
    with pytest.raises(ValueError, match="there is no current batch .* call reset"):
        csv.getdata()


def test_plain_csv_files_take_the_fast_path_and_read_what_the_general_one_does(paths):
    from hybrid.mxnet import io

    def lines(name):
        with open(paths[name]) as f:
            return [line for line in f.read().splitlines() if line]

    assert io._read_plain(lines("numbers.csv"), np.dtype(np.float32)) is None     # exponents: the general path
    for name, dtype in (("plain.csv", np.float32), ("data.csv", np.float32), ("label.csv", np.int32)):
        fast = io._read_plain(lines(name), np.dtype(dtype))
        assert fast is not None, name
        pattern = io._FLOAT_FIELD if dtype == np.float32 else io._INT_FIELD
        fields = [m for line in lines(name) for m in pattern.findall(line)]
        values, read = io._read_floats(fields) if dtype == np.float32 else io._read_ints(fields, np.dtype(dtype))
        np.testing.assert_array_equal(fast[0], values[read], err_msg=name)
        assert fast[0].dtype == dtype
