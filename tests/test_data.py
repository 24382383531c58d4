import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

import hybrid
from hybrid import data
from hybrid.data import batchify


# ---------------------------------------------------------------------------------------------
# Module-level helpers: worker processes unpickle them by reference, so they cannot be local.

class Squares(data.Dataset):
    """Sample i is (i*i as a float32 vector of length 2, i); optional per-sample sleep."""

    def __init__(self, n, delay=0.0):
        self.n, self.delay = n, delay

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay * (self.n - i))  # earlier samples finish later
        return np.full(2, i * i, np.float32), i


class WorkerInfo(data.Dataset):
    """Sample i is (pid, whether a JAX backend is running in this process)."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        time.sleep(0.2)
        from jax._src import xla_bridge
        return np.int64(os.getpid()), np.int64(xla_bridge.backends_are_initialized())


class FailsAt(data.Dataset):
    def __init__(self, bad):
        self.bad = bad

    def __len__(self):
        return 6

    def __getitem__(self, i):
        if i == self.bad:
            raise KeyError(f"sample {i} is broken")
        return np.float32(i)


class DiesAt(FailsAt):
    def __getitem__(self, i):
        if i == self.bad:
            os._exit(3)
        return np.float32(i)


class DiesOnce(FailsAt):
    """Sample 2 kills its worker the first time only (a marker file remembers)."""

    def __init__(self, marker):
        super().__init__(2)
        self.marker = marker

    def __getitem__(self, i):
        if i == self.bad and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(3)
        return np.float32(i)


class GlobalNumpyNoise(data.Dataset):
    """Draws from NumPy's legacy global generator, as much user code does."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        time.sleep(0.05)  # so that both workers get batches
        return np.int64(os.getpid()), np.float64(np.random.rand())


class Recorder(data.Dataset):
    def __init__(self, n):
        self.n, self.seen = n, []

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        self.seen.append(i)
        return np.float32(i)


class Sleepy(data.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        time.sleep(1.0)
        return np.float32(i)


def random_flip(x):
    """A random transform drawing from the per-batch stream."""
    return x[::-1].copy() if data.transform_rng().random() < 0.5 else x


@pytest.fixture
def deadline():
    """Fail (instead of hanging) when a worker test runs longer than 60 s."""
    def expire(signum, frame):
        raise TimeoutError("worker test exceeded 60 s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def run(loader):
    """All batches of ``loader`` as NumPy (or nested tuples of NumPy), then stop its workers."""
    try:
        return [jax.tree_util.tree_map(np.asarray, batch) for batch in loader]
    finally:
        loader.close()


# ---------------------------------------------------------------------------------------------
# Datasets

def test_simple_and_array_dataset():
    ds = data.SimpleDataset([3, 1, 4])
    assert len(ds) == 3 and ds[2] == 4
    x, y = np.arange(12).reshape(6, 2), np.arange(6) * 10
    pairs = data.ArrayDataset(x, y)
    assert len(pairs) == 6
    np.testing.assert_array_equal(pairs[4][0], [8, 9])
    assert pairs[4][1] == 40
    single = data.ArrayDataset(y)
    assert single[2] == 20  # one array: the element itself, not a 1-tuple


def test_array_dataset_errors_and_jax_inputs():
    with pytest.raises(ValueError, match=r"same length, got lengths \[3, 2\]"):
        data.ArrayDataset(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="at least one array"):
        data.ArrayDataset()
    ds = data.ArrayDataset(jax.numpy.arange(4.0))
    assert isinstance(ds[1], np.floating) and ds[1] == 1.0  # stored as NumPy, safe for workers


def test_transform_and_transform_first():
    ds = data.ArrayDataset(np.arange(4), np.arange(4) + 10)
    summed = ds.transform(lambda x, y: x + y)  # tuple samples are unpacked
    assert [summed[i] for i in range(4)] == [10, 12, 14, 16]
    first = ds.transform_first(lambda x: x * 100)
    assert first[3] == (300, 13)
    plain = data.SimpleDataset([1, 2]).transform_first(lambda x: -x)
    assert plain[1] == -2


def test_eager_transform_runs_once_per_sample():
    calls = []
    ds = data.SimpleDataset([1, 2, 3]).transform(lambda x: calls.append(x) or x * 2, lazy=False)
    assert calls == [1, 2, 3]
    assert [ds[i] for i in range(3)] == [2, 4, 6] and calls == [1, 2, 3]
    lazy = data.SimpleDataset([1, 2, 3]).transform(lambda x: calls.append(x) or x, lazy=True)
    assert len(calls) == 3 and lazy[0] == 1 and len(calls) == 4


def test_filter_take_shard():
    ds = data.SimpleDataset(list(range(10)))
    evens = ds.filter(lambda x: x % 2 == 0)
    assert [evens[i] for i in range(len(evens))] == [0, 2, 4, 6, 8]
    assert len(ds.take(3)) == 3 and ds.take(3)[2] == 2
    assert len(ds.take(None)) == 10 and len(ds.take(50)) == 10
    shards = [ds.shard(3, i) for i in range(3)]
    assert [[s[j] for j in range(len(s))] for s in shards] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    with pytest.raises(ValueError, match="index must be smaller than num_shards=3"):
        ds.shard(3, 3)


# ---------------------------------------------------------------------------------------------
# Samplers

def test_sequential_and_interval_samplers():
    assert list(data.SequentialSampler(4, start=3)) == [3, 4, 5, 6]
    assert list(data.IntervalSampler(13, 3)) == [0, 3, 6, 9, 12, 1, 4, 7, 10, 2, 5, 8, 11]
    short = data.IntervalSampler(13, 3, rollover=False)
    assert list(short) == [0, 3, 6, 9, 12] and len(short) == 5
    assert list(data.IntervalSampler(3, 3)) == [0, 1, 2]  # MXNet accepts interval == length
    with pytest.raises(ValueError, match="interval must not exceed length"):
        data.IntervalSampler(3, 4)


def test_filter_sampler():
    sampler = data.FilterSampler(lambda x: x > 1, [5, 0, 3, 1])
    assert list(sampler) == [0, 2] and len(sampler) == 2


def test_random_sampler_is_reproducible_from_hybrid_seed():
    hybrid.random.seed(7)
    sampler = data.RandomSampler(20)
    first, second = list(sampler), list(sampler)
    assert sorted(first) == list(range(20)) and first != list(range(20))
    assert first != second  # a new order every epoch
    hybrid.random.seed(7)
    assert list(sampler) == first and list(sampler) == second


def test_batch_sampler_last_batch_modes():
    seq = data.SequentialSampler(7)
    keep = data.BatchSampler(seq, 3, "keep")
    assert list(keep) == [[0, 1, 2], [3, 4, 5], [6]] and len(keep) == 3
    discard = data.BatchSampler(seq, 3, "discard")
    assert list(discard) == [[0, 1, 2], [3, 4, 5]] and len(discard) == 2
    roll = data.BatchSampler(seq, 3, "rollover")
    assert len(roll) == 2
    assert list(roll) == [[0, 1, 2], [3, 4, 5]]
    assert len(roll) == 2  # (1 carried + 7) // 3
    assert list(roll) == [[6, 0, 1], [2, 3, 4]]  # the leftover 6 starts the next epoch
    assert len(roll) == 3  # (2 carried + 7) // 3
    assert list(roll) == [[5, 6, 0], [1, 2, 3], [4, 5, 6]]
    with pytest.raises(ValueError, match="last_batch must be one of"):
        data.BatchSampler(seq, 3, "pad")


# ---------------------------------------------------------------------------------------------
# Batchify

def test_default_batchify_stacks_fields():
    images, labels = batchify.default_batchify_fn([(np.ones((2, 2)), 1), (np.zeros((2, 2)), 5)])
    assert images.shape == (2, 2, 2) and images[0].sum() == 4 and images[1].sum() == 0
    np.testing.assert_array_equal(labels, [1, 5])
    with pytest.raises(ValueError, match=r"different shapes \[\(2,\), \(3,\)\]"):
        batchify.default_batchify_fn([np.zeros(2), np.zeros(3)])


def test_pad_group_stack_aslist():
    fn = batchify.Group(batchify.Pad(val=-1), batchify.Stack("float32"), batchify.AsList())
    tokens, labels, names = fn([([1, 2, 3], 0, "a"), ([4], 1, "b")])
    np.testing.assert_array_equal(tokens, [[1, 2, 3], [4, -1, -1]])
    assert labels.dtype == np.float32 and names == ["a", "b"]
    rounded = batchify.Pad(round_to=4)([[1, 2, 3, 4, 5]])
    np.testing.assert_array_equal(rounded, [[1, 2, 3, 4, 5, 0, 0, 0]])


# ---------------------------------------------------------------------------------------------
# DataLoader in the main process

def test_loader_yields_jax_batches_with_the_right_values():
    loader = data.DataLoader(Squares(5), batch_size=2)
    batches = list(loader)
    assert len(loader) == 3 and len(batches) == 3
    x, y = batches[1]
    assert isinstance(x, jax.Array) and isinstance(y, jax.Array)
    np.testing.assert_array_equal(x, [[4, 4], [9, 9]])
    np.testing.assert_array_equal(y, [2, 3])
    np.testing.assert_array_equal(batches[2][1], [4])


def test_loader_last_batch_modes():
    def labels(loader):
        return [np.asarray(y).tolist() for _, y in loader]
    assert labels(data.DataLoader(Squares(5), 2, last_batch="discard")) == [[0, 1], [2, 3]]
    roll = data.DataLoader(Squares(5), 2, last_batch="rollover")
    assert labels(roll) == [[0, 1], [2, 3]]
    assert labels(roll) == [[4, 0], [1, 2], [3, 4]]


def test_loader_argument_rules():
    ds = Squares(4)
    with pytest.raises(ValueError, match="batch_size must be given"):
        data.DataLoader(ds)
    with pytest.raises(ValueError, match="shuffle=True cannot be combined with a sampler"):
        data.DataLoader(ds, 2, shuffle=True, sampler=data.SequentialSampler(4))
    batches = data.BatchSampler(data.SequentialSampler(4), 3)
    with pytest.raises(ValueError, match="batch_size, last_batch must not be given together with batch_sampler"):
        data.DataLoader(ds, 2, batch_sampler=batches, last_batch="keep")
    with pytest.raises(ValueError, match="shuffle, sampler must not be given"):
        data.DataLoader(ds, batch_sampler=batches, shuffle=True, sampler=data.SequentialSampler(4))
    with pytest.raises(ValueError, match="num_workers must be an integer >= 0"):
        data.DataLoader(ds, 2, num_workers=-1)
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        data.DataLoader(ds, 2, timeout=0)
    custom = data.DataLoader(ds, batch_sampler=batches)
    assert [np.asarray(y).tolist() for _, y in custom] == [[0, 1, 2], [3]]


def test_shuffled_loader_is_reproducible_and_covers_everything():
    loader = data.DataLoader(Squares(10), batch_size=4, shuffle=True)
    hybrid.random.seed(3)
    epoch1 = np.concatenate([np.asarray(y) for _, y in loader])
    epoch2 = np.concatenate([np.asarray(y) for _, y in loader])
    assert sorted(epoch1.tolist()) == list(range(10)) and epoch1.tolist() != list(range(10))
    assert epoch1.tolist() != epoch2.tolist()
    hybrid.random.seed(3)
    assert np.concatenate([np.asarray(y) for _, y in loader]).tolist() == epoch1.tolist()


def test_custom_batchify_and_non_numeric_leaves():
    ds = data.SimpleDataset(["ab", "c"])
    loader = data.DataLoader(ds, 2, batchify_fn=lambda s: (np.array([len(w) for w in s]), list(s)))
    lengths, words = next(iter(loader))
    assert isinstance(lengths, jax.Array) and lengths.tolist() == [2, 1] and words == ["ab", "c"]


# ---------------------------------------------------------------------------------------------
# DataLoader with workers

def test_process_workers_keep_order_and_iterate_twice(deadline):
    loader = data.DataLoader(Squares(8, delay=0.01), batch_size=2, num_workers=2)
    expected = run(data.DataLoader(Squares(8), batch_size=2))
    try:
        for _ in range(2):
            got = [jax.tree_util.tree_map(np.asarray, b) for b in loader]
            assert len(got) == 4
            for (gx, gy), (ex, ey) in zip(got, expected):
                np.testing.assert_array_equal(gx, ex)
                np.testing.assert_array_equal(gy, ey)
    finally:
        loader.close()


def test_process_workers_are_separate_processes_without_jax_backend(deadline):
    batches = run(data.DataLoader(WorkerInfo(), batch_size=1, num_workers=2))
    pids = {int(pid[0]) for pid, _ in batches}
    assert os.getpid() not in pids and len(pids) == 2
    assert all(int(jax_on[0]) == 0 for _, jax_on in batches)


def test_worker_error_keeps_type_and_message(deadline):
    loader = data.DataLoader(FailsAt(3), batch_size=2, num_workers=2)
    try:
        with pytest.raises(KeyError, match="sample 3 is broken"):
            list(loader)
        # the loader stays usable: a sampler that avoids the broken sample works
        ok = data.DataLoader(FailsAt(3), batch_sampler=[[0, 1], [4, 5]], num_workers=1)
        assert [np.asarray(b).tolist() for b in run(ok)] == [[0, 1], [4, 5]]
    finally:
        loader.close()


def test_dead_worker_is_reported(deadline):
    """The error names the dead worker's pid and exit code. The sample calls os._exit(3), but a worker forked
    from a busy test process has been seen to end with another code first, so any code is accepted."""
    loader = data.DataLoader(DiesAt(2), batch_size=2, num_workers=1)
    reported = r"worker process \(pid \d+, exit code -?\d+[^)]*\) died while making batch 1"
    with pytest.raises(RuntimeError, match=reported):
        run(loader)



def test_the_next_epoch_after_a_dead_worker_gets_new_workers(deadline, tmp_path):
    loader = data.DataLoader(DiesOnce(str(tmp_path / "died")), batch_size=2, num_workers=1)
    try:
        with pytest.raises(RuntimeError, match="died while making batch 1"):
            list(loader)
        assert [np.asarray(b).tolist() for b in loader] == [[0, 1], [2, 3], [4, 5]]
    finally:
        loader.close()


def test_unpicklable_dataset_gives_clear_error_and_threads_accept_it(deadline):
    ds = data.SimpleDataset([1.0, 2.0, 3.0]).transform(lambda x: x * 2)
    with pytest.raises(TypeError, match="thread_pool=True"):
        run(data.DataLoader(ds, batch_size=2, num_workers=1))
    got = run(data.DataLoader(ds, batch_size=2, num_workers=2, thread_pool=True))
    assert [b.tolist() for b in got] == [[2.0, 4.0], [6.0]]


def test_prefetch_bounds_batches_in_flight(deadline):
    for prefetch, expected in ((0, 1), (2, 3)):
        ds = Recorder(10)
        loader = data.DataLoader(ds, batch_size=1, num_workers=2, thread_pool=True, prefetch=prefetch)
        iterator = iter(loader)
        assert next(iterator).tolist() == [0.0]
        end = time.monotonic() + 2.0
        while len(ds.seen) < expected and time.monotonic() < end:
            time.sleep(0.01)
        time.sleep(0.2)  # give the workers time to run further ahead if they were allowed to
        assert len(ds.seen) == expected
        assert [b.tolist() for b in iterator] == [[float(i)] for i in range(1, 10)]
        loader.close()


def test_timeout_raises(deadline):
    loader = data.DataLoader(Sleepy(), batch_size=1, num_workers=1, thread_pool=True, timeout=0.2)
    with pytest.raises(TimeoutError, match="batch 0 was not ready after timeout=0.2 s"):
        list(loader)
    loader.close(wait=False)


def test_workers_draw_distinct_random_numbers(deadline):
    batches = run(data.DataLoader(GlobalNumpyNoise(), batch_size=2, num_workers=2))
    assert len({int(pid) for pids, _ in batches for pid in pids}) == 2
    assert len({float(v) for _, values in batches for v in values}) == 8


def test_random_transforms_match_across_worker_kinds(deadline):
    ds = data.ArrayDataset(np.arange(24, dtype=np.float32).reshape(8, 3)).transform(random_flip)

    def epoch(**kwargs):
        hybrid.random.seed(11)
        return np.stack(run(data.DataLoader(ds, batch_size=2, **kwargs)))

    main = epoch()
    flipped = [bool(row[0] > row[2]) for batch in main for row in batch]
    assert any(flipped) and not all(flipped)
    np.testing.assert_array_equal(epoch(num_workers=2, thread_pool=True), main)
    np.testing.assert_array_equal(epoch(num_workers=2), main)
    hybrid.random.seed(12)
    assert not np.array_equal(np.stack(run(data.DataLoader(ds, batch_size=2))), main)


class Stuck(Sleepy):
    def __getitem__(self, i):
        time.sleep(3600)


class TwoArgumentError(Exception):
    def __init__(self, sample, reason):
        super().__init__(f"sample {sample}: {reason}")


class RaisesTwoArgumentError(FailsAt):
    def __getitem__(self, i):
        if i == self.bad:
            raise TwoArgumentError(i, "unreadable")
        return np.float32(i)


def test_worker_exception_that_cannot_be_rebuilt_arrives_as_text_and_the_pool_survives(deadline):
    loader = data.DataLoader(RaisesTwoArgumentError(3), batch_size=2, num_workers=1)
    try:
        with pytest.raises(data.WorkerError, match=r"TwoArgumentError: sample 3: unreadable") as info:
            list(loader)
        assert "worker traceback" in str(info.value) and "__getitem__" in str(info.value)
        loader._batch_sampler = [[0, 1], [4, 5]]  # the same workers still serve batches
        assert [np.asarray(b).tolist() for b in loader] == [[0, 1], [4, 5]]
    finally:
        loader.close()


def test_interpreter_exits_after_a_worker_timed_out(tmp_path):
    script = tmp_path / "timeout_exit.py"
    script.write_text(
        "import sys\n"
        f"sys.path[:0] = [{os.path.dirname(os.path.abspath(__file__))!r}, "
        f"{os.path.dirname(os.path.dirname(os.path.abspath(__file__)))!r}]\n"
        "from hybrid import data\n"
        "from test_data import Stuck\n"
        "if __name__ == '__main__':\n"
        "    loader = data.DataLoader(Stuck(), batch_size=1, num_workers=1, timeout=1.0)\n"
        "    try:\n"
        "        list(loader)\n"
        "    except TimeoutError as exc:\n"
        "        print('timed out:', exc)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr[-2000:]
    assert "timed out: DataLoader: batch 0 was not ready" in out.stdout
