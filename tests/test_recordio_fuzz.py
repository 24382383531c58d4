"""Fuzzing the RecordIO reader: damaged .rec and .idx files give records or RecordIOError, never another
exception, a hang, or an allocation beyond the file's size (in the style of tests/test_file_fuzz.py).

Mutations: bit flips, overwritten bytes, boundary integers over length words (huge lengths, every
continuation flag), insertions, deletions and truncations; plus exhaustive single-bit flips and truncations
of MXNet-written files.
"""
import os
import pathlib
import struct
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybrid import recordio
from hybrid.recordio import MXIndexedRecordIO, MXRecordIO, RecordIOError

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "recordio"
PLAIN = (FIXTURES / "plain.rec").read_bytes()
PACKED = (FIXTURES / "packed.rec").read_bytes()
PACKED_IDX = (FIXTURES / "packed.idx").read_bytes()
MAGIC = struct.pack("<I", 0xCED7230A)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
LENGTH_WORDS = [0, 1, 3, 4, 0x1FFFFFFF, 0x20000000, 0x20000004, 0x40000000, 0x60000000, 0x7FFFFFFF, 0x80000000,
                0xBFFFFFFF, 0xE0000000, 0xFFFFFFFF]


@st.composite
def mutations(draw, size):
    """1 to 4 edits (kind, position, argument); "word" writes a length word, often at a chunk boundary."""
    edits = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "byte", "word", "insert", "delete", "truncate"]))
        position = draw(st.integers(0, max(size - 1, 0)))
        if kind == "flip":
            argument = 1 << draw(st.integers(0, 7))
        elif kind == "byte":
            argument = draw(st.integers(0, 255))
        elif kind == "word":
            position -= position % 4
            argument = draw(st.sampled_from(LENGTH_WORDS + [int.from_bytes(MAGIC, "little")]))
        elif kind == "insert":
            argument = draw(st.sampled_from([MAGIC, MAGIC + struct.pack("<I", 0x20000000), b"\0" * 4])) \
                if draw(st.booleans()) else draw(st.binary(min_size=1, max_size=8))
        else:
            argument = draw(st.integers(1, 64))
        edits.append((kind, position, argument))
    return edits


def mutate(data: bytes, edits) -> bytes:
    data = bytearray(data)
    for kind, position, argument in edits:
        position = min(position, max(len(data) - 1, 0))
        if kind == "flip" and data:
            data[position] ^= argument
        elif kind == "byte" and data:
            data[position] = argument
        elif kind == "word":
            data[position:position + 4] = struct.pack("<I", argument)
        elif kind == "insert":
            data[position:position] = argument
        elif kind == "delete":
            del data[position:position + argument]
        elif kind == "truncate":
            del data[position:]
    return bytes(data)


def read_sequentially(path):
    """Every record until the end or the first RecordIOError (returned as the last item)."""
    records = []
    with MXRecordIO(path, "r") as reader:
        for _ in range(path.stat().st_size // 8 + 2):  # each record takes at least 8 bytes: more is a hang
            try:
                record = reader.read()
            except RecordIOError as exc:
                records.append(exc)
                return records
            if record is None:
                return records
            records.append(record)
    raise AssertionError("the reader kept returning records past the end of the file")


def bounded(fn, size):
    """``fn()`` run under tracemalloc: it must not allocate much more than ``size`` bytes nor take long."""
    tracemalloc.start()
    start = time.monotonic()
    try:
        result = fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 4 * size + (1 << 20), f"allocated {peak} bytes reading a {size}-byte file"
    assert time.monotonic() - start < 5
    return result


@FUZZ
@given(data=st.data())
def test_fuzz_sequential_reader(tmp_path, data):
    mutated = mutate(PLAIN, data.draw(mutations(len(PLAIN))))
    path = tmp_path / "m.rec"
    path.write_bytes(mutated)
    records = bounded(lambda: read_sequentially(path), len(mutated))
    good = [r for r in records if isinstance(r, bytes)]
    assert sum(len(r) for r in good) <= len(mutated)
    if mutated == PLAIN:
        assert len(good) == 9 and not isinstance(records[-1], Exception)


@FUZZ
@given(data=st.data())
def test_fuzz_indexed_reader(tmp_path, data):
    rec = mutate(PACKED, data.draw(mutations(len(PACKED)))) if data.draw(st.booleans()) else PACKED
    idx = mutate(PACKED_IDX, data.draw(mutations(len(PACKED_IDX)))) if data.draw(st.booleans()) else PACKED_IDX
    (tmp_path / "m.rec").write_bytes(rec)
    (tmp_path / "m.idx").write_bytes(idx)

    def read_every_key():
        try:
            reader = MXIndexedRecordIO(tmp_path / "m.idx", tmp_path / "m.rec", "r")
        except RecordIOError as exc:
            assert "m.idx, line" in str(exc)
            return
        with reader:
            for key in reader.keys:
                try:
                    header, payload = recordio.unpack(reader.read_idx(key))
                except RecordIOError as exc:
                    assert "m.rec" in str(exc) or "m.idx" in str(exc) or "unpack" in str(exc)
                    continue
                assert len(payload) <= len(rec)

    bounded(read_every_key, len(rec) + len(idx))


def test_every_truncation_of_an_mxnet_file_is_refused_or_a_prefix(tmp_path):
    path = tmp_path / "t.rec"
    path.write_bytes(PLAIN)
    full, ends = [], {0}
    with MXRecordIO(path, "r") as reader:
        while (record := reader.read()) is not None:
            full.append(record)
            ends.add(reader.tell())
    for cut in range(len(PLAIN) - 1, -1, -1):
        os.truncate(path, cut)
        records = read_sequentially(path)
        good = [r for r in records if isinstance(r, bytes)]
        assert good == full[:len(good)]
        if cut not in ends:
            assert isinstance(records[-1], RecordIOError), cut
            assert f"record {len(good)} at byte offset" in str(records[-1])


def test_every_bit_flip_of_an_indexed_file(tmp_path):
    (tmp_path / "f.idx").write_bytes(PACKED_IDX)
    path = tmp_path / "f.rec"
    path.write_bytes(PACKED)
    fd = os.open(path, os.O_RDWR)
    try:
        for bit in range(8 * len(PACKED)):
            at, mask = bit // 8, 1 << (bit % 8)
            os.pwrite(fd, bytes([PACKED[at] ^ mask]), at)
            with MXIndexedRecordIO(tmp_path / "f.idx", path, "r") as reader:
                for key in reader.keys:
                    try:
                        recordio.unpack(reader.read_idx(key))
                    except RecordIOError:
                        pass
            os.pwrite(fd, PACKED[at:at + 1], at)
    finally:
        os.close(fd)


@pytest.mark.parametrize("word", [0x1FFFFFFF, 0x1FFFFFFC, 0x20000000 | 0x1FFFFFFF, 0x00100000])
def test_huge_lengths_are_refused_without_allocating_them(tmp_path, word):
    path = tmp_path / "h.rec"
    path.write_bytes(MAGIC + struct.pack("<I", word) + b"tiny")
    with MXRecordIO(path, "r") as reader:
        with pytest.raises(RecordIOError, match=r"h\.rec: corrupt RecordIO record 0 at byte offset 0: the chunk "
                                                r"announces \d+ bytes but the file holds 4"):
            bounded(reader.read, 12)


def test_a_long_chain_of_continuation_chunks_reads_in_linear_time(tmp_path):
    chunk = MAGIC + struct.pack("<I", 2 << 29)
    path = tmp_path / "chain.rec"
    path.write_bytes(MAGIC + struct.pack("<I", 1 << 29) + chunk * 20_000 + MAGIC + struct.pack("<I", 3 << 29))
    with MXRecordIO(path, "r") as reader:
        record = bounded(reader.read, path.stat().st_size)
    assert record == MAGIC * 20_001
    path.write_bytes(MAGIC + struct.pack("<I", 1 << 29) + chunk * 1000)  # never closed
    with MXRecordIO(path, "r") as reader:
        with pytest.raises(RecordIOError, match="truncated file"):
            reader.read()


@pytest.mark.parametrize("flags", [(2,), (3,), (1, 0), (1, 1), (0b100,), (0b111,)])
def test_chunk_flags_out_of_sequence_are_refused(tmp_path, flags):
    path = tmp_path / "c.rec"
    path.write_bytes(b"".join(MAGIC + struct.pack("<I", f << 29) for f in flags))
    with MXRecordIO(path, "r") as reader:
        with pytest.raises(RecordIOError, match=r"chunk flag \d where a (first|continuation) chunk"):
            reader.read()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_image_record_dataset(tmp_path, data):
    """Damaged image records give a sample or a ValueError (RecordIOError, or the decoder's) naming the file."""
    from hybrid.data.vision import ImageRecordDataset
    original = (FIXTURES / "images.rec").read_bytes()
    (tmp_path / "i.rec").write_bytes(mutate(original, data.draw(mutations(len(original)))))
    (tmp_path / "i.idx").write_bytes((FIXTURES / "images.idx").read_bytes())
    dataset = ImageRecordDataset(str(tmp_path / "i.rec"))
    for i in range(len(dataset)):
        try:
            image, _ = dataset[i]
        except ValueError as exc:
            assert "i.rec" in str(exc)
            continue
        assert image.dtype.name == "uint8" and image.ndim == 3 and image.shape[2] == 3
