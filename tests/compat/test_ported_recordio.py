"""Tests ported from Apache MXNet 1.9.1's tests/python/unittest/test_recordio.py and the RecordIO tests of
test_gluon_data.py (v1.x).

MXNet's ``prepare_record`` downloads 16 test images; here they are generated (small JPEGs written with
Pillow). Datasets and transforms used by worker processes are defined at module level.
"""
import io
import random
import string

import numpy as np

from hybrid import data, recordio
from hybrid.data.vision import ImageRecordDataset


def test_recordio(tmp_path):
    """Port of test_recordio.py::test_recordio (MXNet 1.9.1)."""
    frec = str(tmp_path / "rec")
    N = 255

    writer = recordio.MXRecordIO(frec, "w")
    for i in range(N):
        writer.write(bytes(str(chr(i)), "utf-8"))
    del writer

    reader = recordio.MXRecordIO(frec, "r")
    for i in range(N):
        res = reader.read()
        assert res == bytes(str(chr(i)), "utf-8")


def test_indexed_recordio(tmp_path):
    """Port of test_recordio.py::test_indexed_recordio (MXNet 1.9.1)."""
    fidx = str(tmp_path / "idx")
    frec = str(tmp_path / "rec")
    N = 255

    writer = recordio.MXIndexedRecordIO(fidx, frec, "w")
    for i in range(N):
        writer.write_idx(i, bytes(str(chr(i)), "utf-8"))
    del writer

    reader = recordio.MXIndexedRecordIO(fidx, frec, "r")
    keys = reader.keys
    assert sorted(keys) == [i for i in range(N)]
    random.shuffle(keys)
    for i in keys:
        res = reader.read_idx(i)
        assert res == bytes(str(chr(i)), "utf-8")


def test_recordio_pack_label():
    """Port of test_recordio.py::test_recordio_pack_label (MXNet 1.9.1), with N = 64 instead of 255 (the
    original packs 64,770 records, about 7 s here)."""
    N = 64

    for i in range(1, N):
        for j in range(N):
            content = "".join(random.choice(string.ascii_uppercase + string.digits) for _ in range(j))
            content = content.encode("utf-8")
            label = np.random.uniform(size=i).astype(np.float32)
            header = (0, label, 0, 0)
            s = recordio.pack(header, content)
            rheader, rcontent = recordio.unpack(s)
            assert (label == rheader.label).all()
            assert content == rcontent


def prepare_record(tmp_path):
    """MXNet's prepare_record, on 16 generated JPEGs instead of the downloaded test images."""
    from PIL import Image
    rng = np.random.default_rng(0)
    rec = tmp_path / "test.rec"
    record = recordio.MXIndexedRecordIO(str(tmp_path / "test.idx"), str(rec), "w")
    for i in range(16):
        buffer = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (12 + i, 10, 3), dtype=np.uint8)).save(buffer, "JPEG")
        s = recordio.pack((0, i, i, 0), buffer.getvalue())
        record.write_idx(i, s)
    record.close()
    return str(rec)


def test_recordimage_dataset(tmp_path):
    """Port of test_gluon_data.py::test_recordimage_dataset (MXNet v1.x)."""
    recfile = prepare_record(tmp_path)
    fn = lambda x, y: (x, y)  # noqa: E731
    dataset = ImageRecordDataset(recfile).transform(fn)
    loader = data.DataLoader(dataset, 1)

    for i, (x, y) in enumerate(loader):
        assert x.shape[0] == 1 and x.shape[3] == 3
        assert y.item() == i


def _dataset_transform_fn(x, y):
    """Named transform function since lambda function cannot be pickled."""
    return x, y


def _dataset_transform_first_fn(x):
    """Named transform function since lambda function cannot be pickled."""
    return x


def test_recordimage_dataset_with_data_loader_multiworker(tmp_path):
    """Port of test_gluon_data.py::test_recordimage_dataset_with_data_loader_multiworker (MXNet v1.x), with
    2 workers instead of 5."""
    recfile = prepare_record(tmp_path)
    dataset = ImageRecordDataset(recfile)
    loader = data.DataLoader(dataset, 1, num_workers=2)

    for i, (x, y) in enumerate(loader):
        assert x.shape[0] == 1 and x.shape[3] == 3
        assert y.item() == i

    # with transform
    dataset = ImageRecordDataset(recfile).transform(_dataset_transform_fn)
    loader = data.DataLoader(dataset, 1, num_workers=2)

    for i, (x, y) in enumerate(loader):
        assert x.shape[0] == 1 and x.shape[3] == 3
        assert y.item() == i

    # with transform_first
    dataset = ImageRecordDataset(recfile).transform_first(_dataset_transform_first_fn)
    loader = data.DataLoader(dataset, 1, num_workers=2)

    for i, (x, y) in enumerate(loader):
        assert x.shape[0] == 1 and x.shape[3] == 3
        assert y.item() == i
