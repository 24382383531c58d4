"""hybrid.recordio and the RecordIO datasets against files written by MXNet 1.9.1's own mx.recordio and im2rec.

The fixtures in tests/fixtures/recordio were made by make_fixtures.py there (run with MXNet 1.9.1);
expected.json holds what MXNet read back from them. Images decoded by MXNet (OpenCV) and by hybrid
(Pillow) are compared exactly for PNG; for JPEG a difference of up to 2 levels is allowed (both use
libjpeg, but builds may differ in their IDCT), although the committed fixtures decode identically.
"""
import errno
import io
import json
import os
import pathlib
import pickle
import struct
import sys

import numpy as np
import pytest

import hybrid
from hybrid import data, recordio
from hybrid.errors import FormatError
from hybrid.recordio import IRHeader, MXIndexedRecordIO, MXRecordIO, RecordIOError

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "recordio"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())
MAGIC = struct.pack("<I", 0xCED7230A)
JPEG_TOLERANCE = 2


def array(entry):
    return np.frombuffer(bytes.fromhex(entry["hex"]), np.uint8).reshape(entry["shape"])


def plain_records():
    expected = EXPECTED["plain"]
    return [bytes.fromhex(h) for h in expected["records_hex"]]


def read_all(reader):
    records = []
    while (record := reader.read()) is not None:
        records.append(record)
    return records


def same_header(header, expected):
    assert header.flag == expected["flag"] and header.id == expected["id"] and header.id2 == expected["id2"]
    if isinstance(expected["label"], list):
        assert isinstance(header.label, np.ndarray) and header.label.dtype == np.float32
        np.testing.assert_array_equal(header.label, expected["label"])
    else:
        assert isinstance(header.label, float) and header.label == expected["label"]


# --- the on-disk format --------------------------------------------------------------------------------


def test_reads_mxnet_plain_records_including_records_split_at_the_magic_word():
    with MXRecordIO(FIXTURES / "plain.rec", "r") as reader:
        records = read_all(reader)
        assert reader.read() is None  # stays at the end
    assert records[:-1] == plain_records()
    assert len(records[-1]) == EXPECTED["plain"]["last_length"]
    import hashlib
    assert hashlib.sha256(records[-1]).hexdigest() == EXPECTED["plain"]["last_sha256"]
    assert records[1] == b""  # an empty record is b"", not the end


def test_writes_the_same_bytes_as_mxnet(tmp_path):
    with MXRecordIO(FIXTURES / "plain.rec", "r") as reader:
        records = read_all(reader)
    with MXRecordIO(tmp_path / "plain.rec", "w") as writer:
        for record in records:
            writer.write(record)
    assert (tmp_path / "plain.rec").read_bytes() == (FIXTURES / "plain.rec").read_bytes()


def test_chunk_layout_by_hand(tmp_path):
    """Hand-assembled chunks: magic, cflag << 29 | length, data, zero padding to 4 bytes."""
    def chunk(cflag, payload):
        return MAGIC + struct.pack("<I", cflag << 29 | len(payload)) + payload + bytes(-len(payload) % 4)
    cases = [(b"abc", chunk(0, b"abc")),
             (b"wxyz" + MAGIC + b"q", chunk(1, b"wxyz") + chunk(3, b"q")),
             (b"ab" + MAGIC + b"cd", chunk(0, b"ab" + MAGIC + b"cd")),  # unaligned magic: kept in one chunk
             (MAGIC + b"1234" + MAGIC, chunk(1, b"") + chunk(2, b"1234") + chunk(3, b""))]
    for record, expected in cases:
        path = tmp_path / "one.rec"
        with MXRecordIO(path, "w") as writer:
            writer.write(record)
        assert path.read_bytes() == expected
        with MXRecordIO(path, "r") as reader:
            assert reader.read() == record and reader.read() is None


def test_round_trip_of_records_full_of_magic_words(tmp_path):
    rng = np.random.default_rng(0)
    records = []
    for n in (0, 1, 3, 4, 5, 64, 1000):
        raw = bytearray(rng.integers(0, 256, n, dtype=np.uint8).tobytes())
        for at in rng.integers(0, max(n - 3, 1), 5):
            raw[at:at + 4] = MAGIC
        records.append(bytes(raw[:n]))
    path = tmp_path / "m.rec"
    with MXRecordIO(path, "w") as writer:
        positions = []
        for record in records:
            positions.append(writer.tell())
            writer.write(record)
        assert writer.tell() == path.stat().st_size
    assert all(p % 4 == 0 for p in positions)
    with MXRecordIO(path, "r") as reader:
        assert read_all(reader) == records
        reader.reset()
        assert reader.read() == records[0]


# --- indexed files, pack and unpack ---------------------------------------------------------------------


def test_reads_an_mxnet_indexed_file_and_unpacks_its_headers():
    expected = EXPECTED["packed"]
    with MXIndexedRecordIO(FIXTURES / "packed.idx", FIXTURES / "packed.rec", "r") as reader:
        assert reader.keys == expected["keys"]
        assert [reader.idx[k] for k in reader.keys] == expected["offsets"]
        for item in reversed(expected["items"]):  # random access, in another order than written
            record = reader.read_idx(item["key"])
            assert record == bytes.fromhex(item["packed_hex"])
            header, payload = recordio.unpack(record)
            same_header(header, item["header"])
            assert payload == bytes.fromhex(item["payload_hex"])
        reader.seek(expected["keys"][1])
        assert reader.read() == bytes.fromhex(expected["items"][1]["packed_hex"])
        assert reader.read() == bytes.fromhex(expected["items"][2]["packed_hex"])


def test_pack_and_write_idx_give_mxnets_bytes(tmp_path):
    items = [(10, IRHeader(0, 3.0, 7, 0), b"scalar label"),
             (3, IRHeader(5, [1.5, -2.0, 3.25], 2 ** 40 + 1, 9), b"multi label"),
             (7, IRHeader(0, np.array([4.0], np.float32), 1, 2 ** 63), b""),
             (42, IRHeader(0, -0.5, 0, 0), MAGIC + b"payload")]  # the same as make_fixtures.packed_items
    with MXIndexedRecordIO(tmp_path / "packed.idx", tmp_path / "packed.rec", "w") as writer:
        for (key, header, payload), item in zip(items, EXPECTED["packed"]["items"]):
            packed = recordio.pack(header, payload)
            assert packed == bytes.fromhex(item["packed_hex"])
            writer.write_idx(key, packed)
    assert (tmp_path / "packed.rec").read_bytes() == (FIXTURES / "packed.rec").read_bytes()
    assert (tmp_path / "packed.idx").read_bytes() == (FIXTURES / "packed.idx").read_bytes()


def test_pack_header_rules():
    # a number label forces flag 0; an array stores its float32 values after the header, flag = count
    assert recordio.pack((9, 2.5, 1, 2), b"x") == struct.pack("<IfQQ", 0, 2.5, 1, 2) + b"x"
    labels = np.array([[1, 2], [3, 4]])
    assert recordio.pack(IRHeader(0, labels, 5, 0), b"y") == \
        struct.pack("<IfQQ", 4, 0.0, 5, 0) + np.arange(1, 5, dtype="<f4").tobytes() + b"y"
    header, payload = recordio.unpack(recordio.pack(IRHeader(0, labels, 5, 0), b"y"))
    assert header.flag == 4 and payload == b"y" and header.label.tolist() == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="does not fit"):
        recordio.pack(IRHeader(0, 1.0, -1, 0), b"")
    with pytest.raises(ValueError, match="number or an array"):
        recordio.pack(IRHeader(0, "cat", 0, 0), b"")
    with pytest.raises(TypeError, match="bytes"):
        recordio.pack(IRHeader(0, 1.0, 0, 0), "text")
    with pytest.raises(RecordIOError, match="shorter than the 24-byte"):
        recordio.unpack(b"short")
    with pytest.raises(RecordIOError, match="announces 1000 float32 labels"):
        recordio.unpack(struct.pack("<IfQQ", 1000, 0, 0, 0) + b"abcd")


def test_string_keys_and_a_custom_key_type(tmp_path):
    with MXIndexedRecordIO(tmp_path / "s.idx", tmp_path / "s.rec", "w", key_type=str) as writer:
        writer.write_idx("cat/1.jpg", b"one")
        writer.write_idx(2, b"two")  # converted by key_type
    assert (tmp_path / "s.idx").read_text() == "cat/1.jpg\t0\n2\t12\n"
    with MXIndexedRecordIO(tmp_path / "s.idx", tmp_path / "s.rec", "r", key_type=str) as reader:
        assert reader.keys == ["cat/1.jpg", "2"]
        assert reader.read_idx("2") == b"two"
        with pytest.raises(KeyError, match=r"s\.idx: no record with key 2 .*e\.g\. 'cat/1\.jpg'"):
            reader.read_idx(2)


# --- images ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("item", EXPECTED["images"], ids=lambda i: f"{i['name']}{i['format']}")
def test_unpack_img_decodes_like_mxnet(item):
    with MXIndexedRecordIO(FIXTURES / "images.idx", FIXTURES / "images.rec", "r") as reader:
        record = reader.read_idx(item["key"])
    tolerance = 0 if item["format"] == ".png" else JPEG_TOLERANCE
    header, unchanged = recordio.unpack_img(record)
    same_header(header, item["header"])
    expected = array(item["unpack_img_-1"])
    assert unchanged.shape == expected.shape and unchanged.dtype == np.uint8
    assert np.abs(unchanged.astype(int) - expected).max() <= tolerance
    colour = recordio.unpack_img(record, 1)[1]  # BGR, as OpenCV gives it
    assert np.abs(colour[..., ::-1].astype(int) - array(item["imdecode_flag1"])).max() <= tolerance
    grey = recordio.unpack_img(record, 0)[1]
    assert grey.shape == (6, 8)
    # OpenCV (libpng) converts colour PNGs to grey with its own rounding: up to 1 level apart
    assert np.abs(grey.astype(int) - array(item["imdecode_flag0"])[..., 0]).max() <= max(tolerance, 1)
    if item["format"] == ".png":
        source = array(item["source"])
        np.testing.assert_array_equal(colour[..., ::-1] if source.ndim == 3 else unchanged, source)


def test_pack_img_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    bgr = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    grey = rng.integers(0, 256, (5, 7), dtype=np.uint8)
    bgra = rng.integers(0, 256, (5, 7, 4), dtype=np.uint8)
    for img in (bgr, grey, bgra, grey[..., None]):
        header, back = recordio.unpack_img(recordio.pack_img(IRHeader(0, 1.0, 3, 0), img, quality=9,
                                                             img_fmt=".png"))
        np.testing.assert_array_equal(back, img.reshape(back.shape))
        assert header == IRHeader(0, 1.0, 3, 0)
    smooth = np.repeat(np.repeat(np.arange(0, 240, 40, dtype=np.uint8), 8)[None, :, None], 16, 0)
    smooth = np.broadcast_to(smooth, (16, 48, 3)).copy()
    header, back = recordio.unpack_img(recordio.pack_img((0, [1, 2], 9, 0), smooth, quality=95), 1)
    assert header.flag == 2 and np.abs(back.astype(int) - smooth).mean() < 3
    with pytest.raises(ValueError, match="img_fmt"):
        recordio.pack_img(IRHeader(0, 1.0, 0, 0), bgr, img_fmt=".gif")
    with pytest.raises(ValueError, match="uint8"):
        recordio.pack_img(IRHeader(0, 1.0, 0, 0), bgr.astype(np.float32))
    with pytest.raises(ValueError, match="shape"):
        recordio.pack_img(IRHeader(0, 1.0, 0, 0), np.zeros((2, 2, 2), np.uint8))
    with pytest.raises(ValueError, match="iscolor"):
        recordio.unpack_img(recordio.pack(IRHeader(0, 1.0, 0, 0), b""), iscolor=2)
    with pytest.raises(RecordIOError, match="not a readable image"):
        recordio.unpack_img(recordio.pack(IRHeader(0, 1.0, 0, 0), b"\x89PNG not really"))


def test_images_without_pillow_name_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(ImportError, match=r"pip install hybrid\[vision\]"):
        recordio.pack_img(IRHeader(0, 1.0, 0, 0), np.zeros((2, 2, 3), np.uint8))
    with pytest.raises(ImportError, match=r"pip install hybrid\[vision\]"):
        recordio.unpack_img(recordio.pack(IRHeader(0, 1.0, 0, 0), b"x"))


# --- the reader and writer objects ----------------------------------------------------------------------


def test_misuse_gives_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="flag must be 'r' .* or 'w'"):
        MXRecordIO(tmp_path / "x.rec", "a")
    with pytest.raises(FileNotFoundError):
        MXRecordIO(tmp_path / "missing.rec", "r")
    writer = MXRecordIO(tmp_path / "x.rec", "w")
    with pytest.raises(TypeError, match=r"encode text first"):
        writer.write("text")
    with pytest.raises(io.UnsupportedOperation, match="flag 'r'"):
        writer.read()
    writer.close()
    writer.close()  # closing twice is fine
    with pytest.raises(ValueError, match="closed"):
        writer.write(b"x")
    with MXRecordIO(tmp_path / "x.rec", "r") as reader:
        with pytest.raises(io.UnsupportedOperation, match="flag 'w'"):
            reader.write(b"x")
    assert not reader.is_open
    with pytest.raises(ValueError, match="closed"):
        reader.read()


def test_failed_write_leaves_no_partial_record_and_no_index_line(tmp_path, monkeypatch):
    rec, idx = tmp_path / "f.rec", tmp_path / "f.idx"
    writer = MXIndexedRecordIO(idx, rec, "w")
    writer.write_idx(0, b"first record")
    real_write = os.write

    def half_then_full(fd, view):
        real_write(fd, bytes(view[:len(view) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(OSError, match="No space"):
        writer.write_idx(1, b"second record, lost")
    monkeypatch.setattr(os, "write", real_write)
    assert writer.keys == [0] and rec.stat().st_size == writer.tell() == 20
    writer.write_idx(2, b"third")
    writer.close()
    assert idx.read_text() == "0\t0\n2\t20\n"
    with MXIndexedRecordIO(idx, rec, "r") as reader:
        assert [reader.read_idx(k) for k in reader.keys] == [b"first record", b"third"]


def test_index_lines_are_checked(tmp_path):
    (tmp_path / "b.rec").write_bytes((FIXTURES / "packed.rec").read_bytes())
    for text, line in (("10\t0\nnot a line\n", 2), ("x\t0\n", 1), ("1\t-4\n", 1), ("1\t0\n\n2\tlots\n", 3)):
        (tmp_path / "b.idx").write_text(text)
        with pytest.raises(RecordIOError, match=rf"b\.idx, line {line}: expected '<key>\\t<byte offset>'"):
            MXIndexedRecordIO(tmp_path / "b.idx", tmp_path / "b.rec", "r")
    (tmp_path / "b.idx").write_text("10\t0\n\n3\t44\n")  # a blank line is skipped
    assert MXIndexedRecordIO(tmp_path / "b.idx", tmp_path / "b.rec", "r").keys == [10, 3]
    (tmp_path / "b.idx").write_text("10\t0\n11\t184\n12\t1000000\n")
    reader = MXIndexedRecordIO(tmp_path / "b.idx", tmp_path / "b.rec", "r")
    for key in (11, 12):
        with pytest.raises(RecordIOError, match=rf"key {key} points at byte offset \d+, at or past the end of "):
            reader.read_idx(key)
    (tmp_path / "b.idx").write_text("10\t4\n")
    with pytest.raises(RecordIOError, match=r"b\.rec: corrupt RecordIO record of key 10 at byte offset 4: "
                                            r"expected the magic word"):
        MXIndexedRecordIO(tmp_path / "b.idx", tmp_path / "b.rec", "r").read_idx(10)


def test_corrupt_record_errors_name_file_record_and_offset(tmp_path):
    raw = bytearray((FIXTURES / "plain.rec").read_bytes())
    raw[0x40] ^= 0xFF  # the magic word of the second chunk of record 4 (which starts at byte 0x34)
    path = tmp_path / "bad.rec"
    path.write_bytes(bytes(raw))
    with MXRecordIO(path, "r") as reader:
        assert [reader.read() for _ in range(4)] == plain_records()[:4]
        with pytest.raises(RecordIOError, match=r"bad\.rec: corrupt RecordIO record 4 at byte offset 52 "
                                                r"\(its chunk at byte 64\): expected the magic word"):
            reader.read()
    path.write_bytes(bytes((FIXTURES / "plain.rec").read_bytes()[:-3]))
    with MXRecordIO(path, "r") as reader:
        with pytest.raises(RecordIOError, match=r"record 8 at byte offset \d+: the chunk announces 1001 bytes"):
            read_all(reader)
    assert issubclass(RecordIOError, FormatError) and issubclass(RecordIOError, ValueError)


def test_pickled_readers_reopen_and_open_writers_refuse(tmp_path):
    reader = MXRecordIO(FIXTURES / "plain.rec", "r")
    reader.read()
    copy = pickle.loads(pickle.dumps(reader))
    assert copy.read() == b"record_0"  # the copy starts at the first record, as MXNet's does
    assert reader.read() == b""  # the original is untouched
    indexed = MXIndexedRecordIO(FIXTURES / "packed.idx", FIXTURES / "packed.rec", "r")
    copy = pickle.loads(pickle.dumps(indexed))
    assert copy.keys == indexed.keys and copy.read_idx(42) == indexed.read_idx(42)
    closed = MXRecordIO(FIXTURES / "plain.rec", "r")
    closed.close()
    assert pickle.loads(pickle.dumps(closed)).is_open is False
    writer = MXIndexedRecordIO(tmp_path / "w.idx", tmp_path / "w.rec", "w")
    writer.write_idx(0, b"kept")
    with pytest.raises(TypeError, match="open RecordIO writer cannot be pickled"):
        pickle.dumps(writer)
    writer.close()
    assert pickle.loads(pickle.dumps(writer)).is_open is False
    assert (tmp_path / "w.rec").stat().st_size == 12


def test_reset_of_a_writer_starts_empty_files(tmp_path):
    writer = MXIndexedRecordIO(tmp_path / "r.idx", tmp_path / "r.rec", "w")
    writer.write_idx(1, b"gone")
    writer.reset()
    assert writer.keys == [] and writer.tell() == 0
    writer.write_idx(2, b"kept")
    writer.close()
    assert (tmp_path / "r.idx").read_text() == "2\t0\n"


def test_mxnet_alias_serves_recordio():
    import hybrid.mxnet as mx
    assert mx.recordio.MXIndexedRecordIO is recordio.MXIndexedRecordIO and mx.recordio.pack is recordio.pack
    assert hybrid.recordio is recordio


# --- datasets -------------------------------------------------------------------------------------------


def test_record_file_dataset_reads_im2rec_files():
    dataset = data.RecordFileDataset(str(FIXTURES / "im2rec.rec"))
    assert len(dataset) == 4 and dataset.idx_file == str(FIXTURES / "im2rec.idx")
    for i in range(4):
        header, _ = recordio.unpack(dataset[i])
        assert header.label == EXPECTED["im2rec"]["samples"][i]["label"] and header.id == i
    assert dataset[-1] == dataset[3]
    with pytest.raises(IndexError, match=r"index 4 out of range for 4 records"):
        dataset[4]


def test_record_file_dataset_needs_its_index(tmp_path):
    (tmp_path / "lonely.rec").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match=r"index file .*lonely\.idx' not found"):
        data.RecordFileDataset(str(tmp_path / "lonely.rec"))


def first_payload_bytes(record):
    """The first 4 payload bytes of a packed record, zero-padded, and the payload's length (picklable for workers)."""
    payload = recordio.unpack(record)[1]
    return np.frombuffer(payload[:4].ljust(4, b"\0"), np.uint8), len(payload)


def test_record_file_dataset_with_workers():
    dataset = data.RecordFileDataset(str(FIXTURES / "packed.rec")).transform(first_payload_bytes)
    want = [first_payload_bytes(bytes.fromhex(item["packed_hex"])) for item in EXPECTED["packed"]["items"]]
    loader = data.DataLoader(dataset, batch_size=3, num_workers=2)
    try:
        batches = [(np.asarray(x), np.asarray(n)) for x, n in loader]
    finally:
        loader.close()
    np.testing.assert_array_equal(np.concatenate([x for x, _ in batches]), np.stack([x for x, _ in want]))
    assert np.concatenate([n for _, n in batches]).tolist() == [n for _, n in want] == [12, 11, 0, 11]


def test_image_record_dataset_matches_gluons_on_im2rec_files():
    from hybrid.data.vision import ImageRecordDataset
    expected = EXPECTED["im2rec"]
    dataset = ImageRecordDataset(str(FIXTURES / "im2rec.rec"))
    assert len(dataset) == len(expected["samples"]) == 4
    for i, sample in enumerate(expected["samples"]):
        image, label = dataset[i]
        assert image.dtype == np.uint8 and image.shape == (5, 4, 3)
        np.testing.assert_array_equal(image, array(sample["image"]))  # PNG: exact
        np.testing.assert_array_equal(image, array(expected["sources"][expected["lst"][i][2]]))
        assert isinstance(label, float) and label == sample["label"]
    multi = ImageRecordDataset(str(FIXTURES / "im2rec-multi.rec"), flag=0)
    for i, sample in enumerate(expected["multi_samples"]):
        image, label = multi[i]
        assert image.shape == (5, 4, 1) and image.dtype == np.uint8
        assert np.abs(image.astype(int) - array(sample["image"])).max() <= 1  # colour -> grey rounding
        assert label.dtype == np.float32 and label.tolist() == sample["label"]


@pytest.mark.parametrize("flag", [0, 1])
def test_image_record_dataset_decodes_jpeg_and_png_like_gluon(flag):
    from hybrid.data.vision import ImageRecordDataset
    seen = []
    dataset = ImageRecordDataset(str(FIXTURES / "images.rec"), flag=flag,
                                 transform=lambda image, label: seen.append(label) or (image, label))
    for i, item in enumerate(EXPECTED["images"]):
        image, label = dataset[i]
        want = array(item[f"imdecode_flag{flag}"])
        assert image.shape == want.shape and image.dtype == np.uint8
        tolerance = JPEG_TOLERANCE if item["format"] == ".jpg" else int(flag == 0 and item["name"] != "grey")
        assert np.abs(image.astype(int) - want).max() <= tolerance, item["name"] + item["format"]
        if isinstance(item["header"]["label"], list):
            assert label.tolist() == item["header"]["label"]
        else:
            assert label == item["header"]["label"]
    assert len(seen) == len(EXPECTED["images"])


def test_image_record_dataset_errors(tmp_path):
    from hybrid.data.vision import ImageRecordDataset
    with pytest.raises(ValueError, match="flag must be 1 .* or 0"):
        ImageRecordDataset(str(FIXTURES / "images.rec"), flag=-1)
    with MXIndexedRecordIO(tmp_path / "bad.idx", tmp_path / "bad.rec", "w") as writer:
        writer.write_idx(5, recordio.pack(IRHeader(0, 1.0, 0, 0), b"not an image"))
        writer.write_idx(6, b"short")
    dataset = ImageRecordDataset(str(tmp_path / "bad.rec"))
    with pytest.raises(ValueError, match=r"bad\.rec, record of key 5"):
        dataset[0]
    with pytest.raises(RecordIOError, match=r"bad\.rec, record of key 6: unpack: a record of 5 bytes"):
        dataset[1]


def chw_float(image):
    """ToTensor's layout and scale (picklable for workers)."""
    return image.transpose(2, 0, 1).astype(np.float32) / 255


def test_image_record_dataset_with_workers():
    from hybrid.data.vision import ImageRecordDataset
    dataset = ImageRecordDataset(str(FIXTURES / "im2rec.rec")).transform_first(chw_float)
    loader = data.DataLoader(dataset, batch_size=3, num_workers=2)
    try:
        batches = [(np.asarray(x), np.asarray(y)) for x, y in loader]
    finally:
        loader.close()
    samples = EXPECTED["im2rec"]["samples"]
    want = np.stack([array(s["image"]).transpose(2, 0, 1) / np.float32(255) for s in samples])
    np.testing.assert_allclose(np.concatenate([x for x, _ in batches]), want, atol=1e-6)
    assert np.concatenate([y for _, y in batches]).tolist() == [s["label"] for s in samples]
