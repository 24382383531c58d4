"""The Gluon 1.x names library code (GluonCV's model zoo, MXNet's examples) reaches through ``hybrid.mxnet``:
Block internals, ``Lambda``/``HybridLambda`` with MXNet's calling convention, ``gluon.utils``' download
helpers, ``metric.check_label_shapes``, and modules imported by their dotted MXNet 1.x path."""
import hashlib
import os
import subprocess
import sys
import textwrap
from collections import OrderedDict

import numpy as np
import pytest

import hybrid.mxnet as mx
from hybrid.mxnet.gluon import nn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Net(nn.HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.dense = nn.Dense(3, in_units=2)
            self.w = self.params.get("w", shape=(2,))

    def hybrid_forward(self, F, x, w):
        return self.dense(x * w)


def test_collect_params_with_prefix_returns_the_dict_in_its_gluon1_form():
    net = _Net()
    found = net._collect_params_with_prefix()
    assert isinstance(found, OrderedDict) and list(found) == ["w", "dense.weight", "dense.bias"]
    assert found["dense.weight"] is net.dense.weight
    assert list(net.dense._collect_params_with_prefix("dense")) == ["dense.weight", "dense.bias"]
    out = {}
    assert net._collect_params_with_prefix("", out) is out and list(out) == list(found)


def test_underscore_params_is_the_blocks_own_parameters():
    net = _Net()
    assert list(net._params) == ["w"] and net._params["w"] is net._reg_params["w"]
    assert list(net.dense._params) == ["weight", "bias"]


def test_hybrid_lambda_calls_its_function_with_F():
    x = mx.nd.array([-1.0, 2.0])
    block = nn.HybridLambda(lambda F, x: F.relu(x) * 2)
    np.testing.assert_array_equal(block(x).asnumpy(), [0.0, 4.0])
    block.hybridize()
    np.testing.assert_array_equal(block(x).asnumpy(), [0.0, 4.0])
    two = nn.HybridLambda(lambda F, a, b: F.broadcast_add(a, b), prefix="add_")
    np.testing.assert_array_equal(two(x, x).asnumpy(), [-2.0, 4.0])
    assert two.prefix == "add_"


def test_lambdas_given_a_name_use_mxnets_operator_of_that_name():
    x = mx.nd.array([[-1.0, 2.0]])
    np.testing.assert_array_equal(nn.HybridLambda("relu")(x).asnumpy(), [[0.0, 2.0]])
    np.testing.assert_array_equal(nn.Lambda("flatten")(mx.nd.ones((2, 3, 4))).shape, (2, 12))  # mx.nd's flatten
    np.testing.assert_array_equal(nn.Lambda(lambda a: a * 3)(x).asnumpy(), [[-3.0, 6.0]])
    with pytest.raises(ValueError, match="no operator"):
        nn.HybridLambda("no_such_operator")
    with pytest.raises(ValueError, match="unrecognized function"):
        nn.Lambda(3)


def test_the_layer_modules_are_reachable_from_nn():
    assert nn.conv_layers.GlobalAvgPool2D is nn.GlobalAvgPool2D and nn.basic_layers.Dense is nn.Dense
    assert nn.activations.Activation is nn.Activation


def test_repo_urls_follow_mxnet_gluon_repo(monkeypatch):
    utils = mx.gluon.utils
    monkeypatch.delenv("MXNET_GLUON_REPO", raising=False)
    assert utils._get_repo_url() == "https://apache-mxnet.s3-accelerate.dualstack.amazonaws.com/"
    monkeypatch.setenv("MXNET_GLUON_REPO", "http://example.org/repo")
    assert utils._get_repo_url() == "http://example.org/repo/"
    assert utils._get_repo_file_url("gluon/models", "a.zip") == "http://example.org/repo/gluon/models/a.zip"


def test_download_uses_the_file_there_and_check_sha1(tmp_path):
    utils = mx.gluon.utils
    (tmp_path / "weights.bin").write_bytes(b"abc" * 1000)
    digest = hashlib.sha1(b"abc" * 1000).hexdigest()
    url = "http://example.org/models/weights.bin"
    fname = utils.download(url, path=str(tmp_path), sha1_hash=digest)
    assert fname == os.path.join(str(tmp_path), "weights.bin") and utils.check_sha1(fname, digest)
    assert not utils.check_sha1(fname, "0" * 40)
    assert utils.download(url, path=fname) == fname
    with pytest.raises(FileNotFoundError, match="SHA-1"):
        utils.download(url, path=str(tmp_path), sha1_hash="0" * 40)
    with pytest.raises(FileNotFoundError, match="example.org/models/other.bin"):
        utils.download("http://example.org/models/other.bin", path=str(tmp_path))
    with pytest.raises(FileNotFoundError, match="overwrite"):
        utils.download(url, path=str(tmp_path), overwrite=True)


def test_check_label_shapes():
    labels, preds = mx.nd.ones((3,)), mx.nd.ones((3, 2))
    assert mx.metric.check_label_shapes([labels], [preds]) == ([labels], [preds])
    wrapped = mx.metric.check_label_shapes(labels, mx.nd.ones((3,)), wrap=True, shape=True)
    assert isinstance(wrapped[0], list) and isinstance(wrapped[1], list)
    with pytest.raises(ValueError, match="does not match"):
        mx.metric.check_label_shapes(labels, preds, shape=True)
    with pytest.raises(ValueError, match="does not match"):
        mx.metric.check_label_shapes([labels], [preds, preds])


def test_get_interp_method_is_mxnets():
    from hybrid.mxnet.image import _get_interp_method
    assert _get_interp_method(9) == 2  # no sizes: bicubic, as MXNet
    assert _get_interp_method(9, (10, 10, 20, 20)) == 2 and _get_interp_method(9, (20, 20, 10, 10)) == 3
    assert _get_interp_method(9, (10, 20, 20, 10)) == 1 and _get_interp_method(1) == 1
    with pytest.raises(ValueError):
        _get_interp_method(7)


def test_mxnet_batchify_gives_the_alias_arrays():
    from hybrid.mxnet.gluon.data import dataloader
    batch = dataloader.default_batchify_fn([(mx.nd.ones((2,)), 1), (mx.nd.zeros((2,)), 2)])
    assert isinstance(batch, list) and isinstance(batch[0], mx.nd.NDArray) and isinstance(batch[1], mx.nd.NDArray)
    np.testing.assert_array_equal(batch[0].asnumpy(), [[1, 1], [0, 0]])
    np.testing.assert_array_equal(batch[1].asnumpy(), [1, 2])
    assert dataloader.default_mp_batchify_fn([np.float32(1.5)]).dtype == np.float32


def _double_batch(samples, batchify_fn, dataset):
    return batchify_fn([dataset[i] * 2 for i in samples])


def test_multi_worker_iter_gives_the_batches_in_sampler_order():
    from multiprocessing.pool import ThreadPool
    from hybrid.mxnet.gluon.data import BatchSampler, SequentialSampler, dataloader
    dataset = np.arange(10, dtype=np.float32)
    sampler = BatchSampler(SequentialSampler(10), 4, "keep")
    with ThreadPool(2) as pool:
        batches = dataloader._MultiWorkerIter(pool, dataloader.default_batchify_fn, sampler, prefetch=2,
                                              worker_fn=_double_batch, dataset=dataset)
        assert len(batches) == 3
        got = [b.asnumpy().tolist() for b in batches]
    assert got == [[0, 2, 4, 6], [8, 10, 12, 14], [16, 18]]
    with ThreadPool(1, initializer=dataloader._worker_initializer, initargs=(dataset,)) as pool:  # pickled batches
        got = [b.asnumpy().tolist() for b in dataloader._MultiWorkerIter(pool, dataloader.default_batchify_fn,
                                                                        sampler)]
    assert got == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_gluon1_modules_import_by_their_dotted_path():
    script = textwrap.dedent("""
        import hybrid.mxnet
        hybrid.mxnet.install()
        import mxnet as mx
        from mxnet.gluon.data.dataloader import DataLoader, _MultiWorkerIter, default_mp_batchify_fn
        from mxnet.util import is_np_array
        from mxnet.contrib import amp
        from mxnet.contrib.io import DataLoaderIter
        from mxnet.test_utils import get_mnist_iterator
        from mxnet.gluon.model_zoo import vision
        from mxnet.image.image import _get_interp_method
        from mxnet.metric import check_label_shapes
        from mxnet.gluon.utils import download, check_sha1, _get_repo_url
        import hybrid
        assert DataLoader is mx.gluon.data.DataLoader and is_np_array is mx.npx.is_np_array
        assert amp is hybrid.amp and mx.contrib.amp is amp and mx.util.is_np_shape is mx.npx.is_np_shape
        assert _get_interp_method is mx.image._get_interp_method
        print("OK")
    """)
    env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.strip() == "OK", proc.stderr[-2000:]


def test_model_zoo_vision_builders_take_mxnet_contexts():
    vision = mx.gluon.model_zoo.vision
    net = vision.get_model("resnet18_v1", ctx=[mx.cpu()], classes=10)
    assert isinstance(net, vision.ResNetV1)
    assert isinstance(vision.mobilenet0_25(ctx=mx.cpu(), classes=4), vision.MobileNet)
    with pytest.raises(TypeError, match="ctx"):
        vision.get_model("resnet18_v1", ctx="cpu")


def _write_idx(folder, prefix, images, labels):
    import struct
    with open(os.path.join(folder, f"{prefix}-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 2051, len(images), 28, 28) + images.tobytes())
    with open(os.path.join(folder, f"{prefix}-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 2049, len(labels)) + labels.tobytes())


def test_get_mnist_iterator_reads_data_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.makedirs("data")
    images = np.arange(20 * 28 * 28, dtype=np.uint32).reshape(20, 28, 28).astype(np.uint8)
    labels = (np.arange(20) % 10).astype(np.uint8)
    _write_idx("data", "train", images, labels)
    _write_idx("data", "t10k", images[:10], labels[:10])
    train, val = mx.test_utils.get_mnist_iterator(5, (1, 28, 28))
    batch = next(iter(val))
    assert batch.data[0].shape == (5, 1, 28, 28)
    first = int(batch.label[0].asnumpy()[0])  # the labels of this file are the images' indices
    np.testing.assert_allclose(batch.data[0].asnumpy()[0, 0], images[first] / 256.0, rtol=1e-6)
    val.reset()
    assert sorted(int(v) for b in val for v in b.label[0].asnumpy()) == list(range(10))
    seen = sorted(int(v) for b in train for v in b.label[0].asnumpy())
    assert seen == sorted(labels.tolist())  # every training image once, shuffled
    flat, _ = mx.test_utils.get_mnist_iterator(5, (784,))
    assert next(iter(flat)).data[0].shape == (5, 784)


def test_data_loader_iter_gives_padded_data_batches():
    from hybrid.mxnet.contrib.io import DataLoaderIter
    dataset = mx.gluon.data.ArrayDataset(np.arange(10, dtype=np.float32).reshape(5, 2), np.arange(5))
    it = DataLoaderIter(mx.gluon.data.DataLoader(dataset, batch_size=2))
    assert it.batch_size == 2 and it.provide_data[0].shape == (2, 2) and it.provide_label[0].name == "softmax_label"
    batches = list(it)
    assert [b.pad for b in batches] == [0, 0, 1]
    np.testing.assert_array_equal(batches[2].data[0].asnumpy(), [[8, 9], [0, 0]])
    assert batches[2].label[0].dtype == np.float32
    it.reset()
    assert len(list(it)) == 3


def test_recurrent_begin_state_takes_an_mxnet_context():
    layer = mx.gluon.rnn.LSTM(4, input_size=3)
    states = layer.begin_state(batch_size=2, func=mx.nd.zeros, ctx=mx.cpu())
    assert [tuple(s.shape) for s in states] == [(1, 2, 4), (1, 2, 4)]
    with pytest.raises(TypeError, match="jax.Device"):
        layer.begin_state(batch_size=2, ctx="cpu")


def test_clip_global_norm_scales_gradients_and_handles_in_place_as_mxnet():
    """MXNet's clip_global_norm writes the arrays it is given; here the arrays Parameters' grad() returned
    (word_language_model's `clip_global_norm([p.grad() for p in params], ...)`) and handles. For y =
    10 * sum(Dense(x)) over 4 rows of ones, W's gradient is 40 everywhere (2x3) and b's 40 (2): norm
    sqrt(8) * 40; after clipping to 1, the gradients' norm is 1 and their direction kept."""
    from hybrid.mxnet import autograd, gluon, nd
    net = nn.Dense(2, in_units=3)
    net.initialize(mx.init.One())
    with autograd.record():
        y = (net(nd.ones((4, 3))) * 10).sum()
    y.backward()
    params = list(net.collect_params().values())
    norm = gluon.utils.clip_global_norm([p.grad() for p in params], 1.0)
    assert abs(norm - 40 * np.sqrt(8)) < 1e-3
    for p in params:
        np.testing.assert_allclose(p.grad().asnumpy(), np.full(p.shape, 1 / np.sqrt(8)), rtol=1e-5)
    params[1].grad()[:] = 0  # a write into the array grad() returned writes the gradient
    assert not params[1].grad().asnumpy().any()
    handles = [nd.array([3.0, 4.0])]
    assert gluon.utils.clip_global_norm(handles, 1.0) == 5.0
    np.testing.assert_allclose(handles[0].asnumpy(), [0.6, 0.8], rtol=1e-6)
    with pytest.raises(TypeError, match="cannot change in place"):
        gluon.utils.clip_global_norm([np.ones(2)], 1.0)
