"""data.prefetch_to_device: batches placed on the device ahead of the step, in order, errors at their batch."""
import signal
import threading
import time

import jax
import numpy as np
import pytest

import hybrid
from hybrid import autograd, data, estimator, init, loss, nn
from hybrid.trainer import Trainer

from helpers import run_on_cpu_devices


# Module-level datasets: worker processes unpickle them by reference.

class Pairs(data.Dataset):
    """Sample i: (float32 [i, -i], int64 i); later samples are made faster than earlier ones."""

    def __init__(self, n=10, delay=0.0, bad=None):
        self.n, self.delay, self.bad = n, delay, bad

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.bad:
            raise KeyError(f"sample {i} is broken")
        if self.delay:
            time.sleep(self.delay * (self.n - i))
        return np.array([i, -i], np.float32), np.int64(i)


class Counted(data.Dataset):
    def __init__(self, n, delay=0.0):
        self.n, self.delay, self.seen = n, delay, []

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        self.seen.append(i)
        time.sleep(self.delay)
        return np.float32(i)


def with_names(samples):
    """A batchify_fn whose batch holds a non-array leaf too."""
    return {"x": np.stack([s[0] for s in samples]), "name": [f"s{int(s[1])}" for s in samples]}


@pytest.fixture
def deadline():
    def expire(signum, frame):
        raise TimeoutError("prefetch test exceeded 60 s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def prefetch_threads():
    return [t for t in threading.enumerate() if t.name == "hybrid-prefetch_to_device"]


def wait_for_no_prefetch_thread(seconds=3.0):
    end = time.monotonic() + seconds
    while prefetch_threads() and time.monotonic() < end:
        time.sleep(0.01)
    return prefetch_threads()


def as_numpy(batches):
    return [jax.tree_util.tree_map(np.asarray, b) for b in batches]


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_equal_the_loaders_own_in_order_and_dtype(deadline, workers):
    loader = data.DataLoader(Pairs(10, delay=0.002 if workers else 0.0), batch_size=3, shuffle=True,
                             num_workers=workers)
    try:
        hybrid.random.seed(5)
        plain = list(loader)
        hybrid.random.seed(5)
        fetched = list(data.prefetch_to_device(loader, size=2))
    finally:
        loader.close()
    assert len(fetched) == len(plain) == 4
    order = [int(i) for _, ys in as_numpy(plain) for i in ys]
    assert sorted(order) == list(range(10)) and order != list(range(10))  # shuffled, every sample once
    for (x, y), (px, py) in zip(fetched, plain):
        assert isinstance(x, jax.Array) and x.dtype == px.dtype == np.float32 and y.dtype == py.dtype == np.int32
        np.testing.assert_array_equal(np.asarray(x), np.asarray(px))
        np.testing.assert_array_equal(np.asarray(y), np.asarray(py))
        assert x.devices() == {jax.devices()[0]}


def test_non_array_leaves_pass_through_and_device_is_honoured(deadline):
    loader = data.DataLoader(Pairs(5), batch_size=2, batchify_fn=with_names)
    device = jax.devices()[0]
    got = list(data.prefetch_to_device(loader, device=device))
    assert [b["name"] for b in got] == [["s0", "s1"], ["s2", "s3"], ["s4"]]
    assert all(isinstance(b["x"], jax.Array) and b["x"].devices() == {device} for b in got)
    np.testing.assert_array_equal(np.asarray(got[2]["x"]), [[4, -4]])


def test_any_iterable_of_batches_is_accepted_and_len_follows_the_loader():
    batches = [(np.ones((2, 3), np.float64), 7), (np.zeros((2, 3), np.float64), 8)]
    fetched = data.prefetch_to_device(batches)
    assert len(fetched) == 2
    got = list(fetched)
    assert got[0][0].dtype == np.float32 and got[0][1] == 7 and got[1][1] == 8  # Python leaves untouched
    unsized = data.prefetch_to_device(iter(batches))
    assert not hasattr(unsized, "__len__") and len(list(unsized)) == 2


def test_loader_error_is_raised_at_its_batch(deadline):
    for workers in (0, 2):
        loader = data.DataLoader(Pairs(10, bad=5), batch_size=2, num_workers=workers)
        got = []
        with pytest.raises(KeyError, match="sample 5 is broken"):
            for x, _ in data.prefetch_to_device(loader, size=3):
                got.append(np.asarray(x)[:, 0].tolist())
        assert got == [[0, 1], [2, 3]]  # the batches before it arrive first
        loader.close()
        assert wait_for_no_prefetch_thread() == []


def test_early_break_stops_the_thread_and_bounds_the_work_ahead(deadline):
    ds = Counted(40, delay=0.005)
    loader = data.DataLoader(ds, batch_size=1)
    for k, _ in enumerate(data.prefetch_to_device(loader, size=2)):
        if k == 0:
            time.sleep(0.3)  # the thread could make many batches now, but takes at most size=2 ahead
            assert len(ds.seen) <= 3
        if k == 3:
            break
    assert wait_for_no_prefetch_thread() == []
    assert len(ds.seen) <= 7
    seen = len(ds.seen)
    time.sleep(0.1)
    assert len(ds.seen) == seen  # nothing keeps reading the dataset


def test_early_break_with_worker_processes_and_the_next_epoch(deadline):
    loader = data.DataLoader(Pairs(12, delay=0.001), batch_size=2, num_workers=2)
    fetched = data.prefetch_to_device(loader)
    try:
        for k, _ in enumerate(fetched):
            if k == 1:
                break
        assert wait_for_no_prefetch_thread() == []
        assert [np.asarray(y).tolist() for _, y in fetched] == [[2 * k, 2 * k + 1] for k in range(6)]
    finally:
        loader.close()


def test_the_next_batch_is_made_while_the_step_runs(deadline):
    """Making a batch takes 40 ms and a step 40 ms: with prefetching the loop takes about 8 x 40 ms, not 8 x 80."""
    loader = data.DataLoader(Counted(8, delay=0.04), batch_size=1)

    def loop(batches):
        start = time.perf_counter()
        for _ in batches:
            time.sleep(0.04)
        return time.perf_counter() - start

    serial = loop(loader)
    overlapped = loop(data.prefetch_to_device(loader))
    assert serial > 0.6 and overlapped < 0.8 * serial, (serial, overlapped)


def test_bad_arguments_are_named():
    loader = data.DataLoader(Pairs(4), batch_size=2)
    with pytest.raises(ValueError, match="at most one of device, mesh and sharding, got device, mesh"):
        data.prefetch_to_device(loader, device=jax.devices()[0], mesh=hybrid.distributed.make_mesh(1))
    with pytest.raises(TypeError, match="mesh must be a jax.sharding.Mesh"):
        data.prefetch_to_device(loader, mesh="data")
    with pytest.raises(TypeError, match="device must be a jax.Device"):
        data.prefetch_to_device(loader, device="cpu:0")
    with pytest.raises(ValueError, match="size must be at least 1"):
        data.prefetch_to_device(loader, size=0)
    with pytest.raises(TypeError, match="loader must be iterable"):
        data.prefetch_to_device(3)


def small_net():
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="tanh", in_units=2), nn.Dense(3, in_units=8))
    net.initialize(init.Xavier())
    rng = np.random.default_rng(0)
    for p in net.collect_params().values():
        p.set_data(rng.standard_normal(p.shape).astype(np.float32) * 0.5)
    net.hybridize()
    return net


def labelled(n=24):
    rng = np.random.default_rng(1)
    return data.ArrayDataset(rng.standard_normal((n, 2)).astype(np.float32), rng.integers(0, 3, n))


def test_estimator_fit_and_the_gluon_loop_train_as_with_the_loader():
    loader = data.DataLoader(labelled(), batch_size=4)

    def fitted(train_data):
        net = small_net()
        trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
        est = estimator.Estimator(net, loss.SoftmaxCELoss(), trainer=trainer)
        est.fit(train_data, epochs=2)
        assert est.batches_per_epoch == 6
        return [np.asarray(p.data()) for p in net.collect_params().values()]

    def gluon_loop(train_data):
        net = small_net()
        trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
        loss_fn = loss.SoftmaxCELoss()
        for _ in range(2):
            for x, y in train_data:
                with autograd.record():
                    out = loss_fn(net(x), y)
                out.backward()
                trainer.step(x.shape[0])
        return [np.asarray(p.data()) for p in net.collect_params().values()]

    initial = [np.asarray(p.data()) for p in small_net().collect_params().values()]
    for train in (fitted, gluon_loop):
        want = train(loader)
        got = train(data.prefetch_to_device(loader))
        assert not np.allclose(want[0], initial[0])  # it trained
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert wait_for_no_prefetch_thread() == []


FOUR_DEVICES = r"""
import jax, numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P
import hybrid
from hybrid import autograd, data, distributed, loss, nn, init
from hybrid.trainer import Trainer

rng = np.random.default_rng(0)
ds = data.ArrayDataset(rng.standard_normal((32, 6)).astype(np.float32), rng.integers(0, 3, 32))
loader = data.DataLoader(ds, batch_size=8)
mesh = distributed.make_mesh(4)
plain = [(np.asarray(x), np.asarray(y)) for x, y in loader]
for (x, y), (px, py) in zip(data.prefetch_to_device(loader, mesh=mesh), plain):
    assert x.sharding == NamedSharding(mesh, P("data")) and y.sharding == NamedSharding(mesh, P("data")), x.sharding
    assert len(x.addressable_shards) == 4 and x.addressable_shards[0].data.shape == (2, 6)
    np.testing.assert_array_equal(np.asarray(x), px)
    np.testing.assert_array_equal(np.asarray(y), py)
third = jax.devices()[2]
assert all(x.devices() == {third} for x, _ in data.prefetch_to_device(loader, device=third))
try:
    list(data.prefetch_to_device(data.DataLoader(ds, batch_size=6), mesh=mesh))
except ValueError as exc:
    assert "cannot be split evenly over 4 devices" in str(exc), exc
else:
    raise AssertionError("an indivisible batch was accepted")

def train(prefetch):
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="tanh", in_units=6), nn.Dense(3, in_units=8))
    net.initialize(init.Xavier())
    for p in net.collect_params().values():
        p.set_data(np.random.default_rng(1).standard_normal(p.shape).astype(np.float32) * 0.5)
    net.hybridize()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, mesh=mesh)
    loss_fn = loss.SoftmaxCELoss()
    batches = (data.prefetch_to_device(loader, mesh=trainer.mesh) if prefetch
               else (distributed.shard_batch(b, trainer.mesh) for b in loader))
    for x, y in batches:
        with autograd.record():
            out = loss_fn(net(x), y)
        out.backward()
        trainer.step(x.shape[0])
    return [np.asarray(p.data()) for p in net.collect_params().values()]

for a, b in zip(train(True), train(False)):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
print("ok")
"""


def test_batches_are_split_over_the_trainers_mesh_on_four_devices():
    assert run_on_cpu_devices(FOUR_DEVICES, count=4).strip().endswith("ok")
