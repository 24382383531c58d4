"""``mx.kv`` (``mx.kvstore``): one-process key-value stores against MXNet 1.9.1 (push sums, pulls, updates by an
optimizer), their errors, and ``gluon.Trainer(..., kvstore=...)``.

The programs are ``fixtures/mxnet_kvstore/cases.py``; MXNet's results were saved by its ``make_fixtures.py``.
"""
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import hybrid.mxnet as mx
from hybrid._core import compat as _compat
from hybrid.mxnet import gluon, nd
from hybrid.mxnet.base import MXNetError
from helpers import fixture_module

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "mxnet_kvstore")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
cases = fixture_module("mxnet_kvstore")
compare_with_mxnet = fixture_module("mxnet_kvstore", "compare").compare_with_mxnet

ARRAYS = np.load(os.path.join(HERE, "results.npz"))
with open(os.path.join(HERE, "results.json")) as f:
    SCALARS = json.load(f)

KVSTORE_CASES = ["push_pull_sums", "string_keys_and_casts", "errors", "sgd_fixed_lr", "sgd_momentum_wd_rescale",
                 "sgd_clip", "adam", "custom_updater", "optimizer_states_round_trip"]


@pytest.mark.parametrize("case", KVSTORE_CASES)
def test_case_gives_mxnets_results(case):
    compare_with_mxnet(case, cases.CASES[case](mx), rtol=1e-5 if case == "adam" else 1e-6)


def test_fixture_updates_are_not_trivial():
    """The optimizer cases must move the weights (else a store ignoring the optimizer could pass)."""
    initial = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    for case in ("sgd_fixed_lr", "sgd_momentum_wd_rescale", "adam"):
        assert not np.allclose(ARRAYS[f"{case}/w0_step0"], initial)
        assert not np.allclose(ARRAYS[f"{case}/w0_step1"], ARRAYS[f"{case}/w0_step0"])


def test_kv_is_kvstore_and_every_local_type_is_one_process():
    assert mx.kv is mx.kvstore
    for name in ("local", "device", "local_update_cpu", "local_allreduce_cpu", "local_allreduce_device", "nccl",
                 "Device"):
        kv = mx.kv.create(name)
        assert isinstance(kv, mx.kv.KVStore) and kv.type == name.lower()
        assert (kv.rank, kv.num_workers) == (0, 1)
    assert mx.kv.create().type == "local"


def test_sgd_update_by_hand():
    kv = mx.kv.create("local")
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.5, wd=0.1))
    kv.init("w", nd.array([2.0, -4.0]))
    kv.push("w", [nd.array([1.0, 1.0]), nd.array([1.0, 3.0])])  # the gradient is the sum: [2, 4]
    out = nd.zeros((2,))
    kv.pull("w", out=out)
    np.testing.assert_allclose(out.asnumpy(), [2.0 - 0.5 * (2.0 + 0.2), -4.0 - 0.5 * (4.0 - 0.4)], rtol=1e-6)


def test_pull_writes_into_the_handles_given_and_their_views():
    kv = mx.kv.create("local")
    kv.init(0, nd.ones((2,)) * 5)
    base = nd.zeros((3, 2))
    row = base[1]
    alias = base
    kv.pull(0, out=row)                          # a view: writes the row of base
    np.testing.assert_array_equal(alias.asnumpy(), [[0, 0], [5, 5], [0, 0]])
    ints = nd.zeros((2,), dtype="int32")
    kv.pull(0, out=ints)
    assert ints.dtype == np.int32 and ints.asnumpy().tolist() == [5, 5]


def test_stored_value_is_a_copy():
    kv = mx.kv.create("local")
    value = nd.ones((2,))
    kv.init(1, value)
    value[:] = 7                                 # a later write to the array given does not reach the store
    out = nd.zeros((2,))
    kv.pull(1, out=out)
    np.testing.assert_array_equal(out.asnumpy(), [1.0, 1.0])


def test_row_sparse_pull_gives_the_rows_asked_for():
    kv = mx.kv.create("local")
    kv.init("e", nd.arange(6).reshape((3, 2)))
    out = nd.ones((3, 2)) * -1
    kv.row_sparse_pull("e", out=out, row_ids=nd.array([2, 0], dtype="int32"))
    np.testing.assert_array_equal(out.asnumpy(), [[0, 1], [0, 0], [4, 5]])


def test_registered_store_is_created_by_name():
    @mx.kv.KVStoreBase.register
    class MyStore(mx.kv.KVStoreBase):
        @property
        def type(self):
            return "mystore"

    try:
        assert isinstance(mx.kv.create("MyStore"), MyStore)
    finally:
        del mx.kv.KVStoreBase.kv_registry["mystore"]
    with pytest.raises(TypeError, match="KVStoreBase subclass"):
        mx.kv.KVStoreBase.register(int)


# -- errors ----------------------------------------------------------------------------------------------
def test_errors_name_the_key_and_the_argument():
    kv = mx.kv.create("local")
    kv.init(3, nd.ones((2, 2)))
    with pytest.raises(MXNetError, match="duplicate init of key 3"):
        kv.init(3, nd.ones((2, 2)))
    with pytest.raises(MXNetError, match=r"key 9 has not been initialised.*kv.init\(9"):
        kv.pull(9, out=nd.zeros((2, 2)))
    with pytest.raises(MXNetError, match="key 9 has not been initialised"):
        kv.push(9, nd.ones((2, 2)))
    with pytest.raises(ValueError, match=r"key 3 has shape \(3, 2\).*stored value has shape \(2, 2\)"):
        kv.push(3, nd.ones((3, 2)))
    with pytest.raises(ValueError, match=r"value 1 of 2 pushed to key 3 has shape \(2, 2\) and dtype int32"):
        kv.push(3, [nd.ones((2, 2)), nd.ones((2, 2), dtype="int32")])
    with pytest.raises(ValueError, match=r"out for key 3 has shape \(3, 3\)"):
        kv.pull(3, out=nd.zeros((3, 3)))
    with pytest.raises(TypeError, match="out for key 3 must be an NDArray"):
        kv.pull(3, out=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="out= is required"):
        kv.pull(3)
    with pytest.raises(MXNetError, match="key 'w' is a str.*mixed key types"):
        kv.init("w", nd.ones((1,)))
    with pytest.raises(TypeError, match="a key must be an int or a str, got 1.5"):
        kv.push(1.5, nd.ones((1,)))
    with pytest.raises(ValueError, match=r"2 keys \[3, 4\] need a list of 2 values"):
        kv.push([3, 4], nd.ones((2, 2)))
    with pytest.raises(TypeError, match="value for key 3 must be an NDArray"):
        kv.push(3, "gradient")
    with pytest.raises(ValueError, match="key 5 takes one value"):
        kv.init(5, [nd.ones((1,)), nd.ones((1,))])


def test_create_refuses_unknown_and_distributed_types_clearly():
    with pytest.raises(ValueError, match="unknown store type 'foo'.*local, device"):
        mx.kv.create("foo")
    with pytest.raises(TypeError, match="name must be a string"):
        mx.kv.create(3)
    for name in ("dist_sync", "dist_async", "dist_device_sync", "horovod"):
        with pytest.raises(MXNetError, match=r"hybrid.distributed.*initialize\(\) \(jax.distributed\).*make_mesh"):
            mx.kv.create(name)


def test_optimizer_errors():
    kv = mx.kv.create("local")
    with pytest.raises(TypeError, match="expected an mx.optimizer.Optimizer"):
        kv.set_optimizer("sgd")
    with pytest.raises(TypeError, match="updater must be callable"):
        kv.set_updater(3)
    with pytest.raises(MXNetError, match="no optimizer; call kv.set_optimizer"):
        kv.save_optimizer_states("never-written")
    assert not os.path.exists("never-written")
    with pytest.raises(ValueError, match="unknown capability"):
        kv.is_capable("compression")
    with pytest.raises(MXNetError, match="not supported by a 'local' store"):
        kv.set_gradient_compression({"type": "2bit"})


def test_load_optimizer_states_of_another_optimizer_changes_nothing(tmp_path):
    path = str(tmp_path / "states")
    kv = mx.kv.create("local")
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9))
    kv.init(0, nd.array([1.0, 2.0]))
    kv.push(0, nd.array([1.0, -1.0]))
    kv.save_optimizer_states(path, dump_optimizer=True)
    other = mx.kv.create("local")
    other.set_optimizer(mx.optimizer.Adam())
    with pytest.raises(ValueError, match="holds states of SGD, this store's optimizer is Adam"):
        other.load_optimizer_states(path)
    assert other._updater.states == {}


# -- the alias and the Trainer ---------------------------------------------------------------------------
def test_import_mxnet_kv_through_the_alias():
    script = textwrap.dedent("""
        import hybrid.mxnet
        hybrid.mxnet.install()
        import mxnet as mx
        import mxnet.kvstore
        from mxnet import kv, profiler, test_utils
        from mxnet.kvstore import KVStore, create
        from mxnet.test_utils import assert_almost_equal
        from mxnet.profiler import Domain
        assert kv is mxnet.kvstore is mx.kv and create is kv.create and isinstance(kv.create('device'), KVStore)
        assert profiler is mx.profiler and test_utils is mx.test_utils and Domain is profiler.Domain
        assert_almost_equal(mx.nd.ones((2,)), [1.0, 1.0])
        print("OK")
    """)
    env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.strip() == "OK", proc.stderr[-2000:]


def _train(kvstore):
    mx.random.seed(3)
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize(mx.init.Xavier())
    _compat._WARNED.discard(("Trainer", "kvstore"))  # the warning is given once per process
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.5},
                                kvstore=kvstore)
    x = nd.array(np.arange(12, dtype=np.float32).reshape(4, 3) / 10)
    for _ in range(3):
        with mx.autograd.record():
            loss = (net(x) ** 2).sum()
        loss.backward()
        trainer.step(4)
    kv_warnings = [str(w.message) for w in caught if "kvstore" in str(w.message)]
    return [p.data().asnumpy() if hasattr(p.data(), "asnumpy") else np.asarray(p.data())
            for p in net.collect_params().values()], kv_warnings


def test_trainer_accepts_one_process_stores_and_trains_as_without():
    reference, warned = _train(None)
    assert warned == []
    for kvstore in ("device", "local", "nccl", mx.kv.create("device"), mx.kv.create("local_allreduce_cpu")):
        weights, warned = _train(kvstore)
        assert warned == [], (kvstore, warned)
        for got, want in zip(weights, reference):
            np.testing.assert_array_equal(got, want)
    _, warned = _train("dist_sync")                # still said: no parameter server here
    assert len(warned) == 1 and "docs/distributed.md" in warned[0]
