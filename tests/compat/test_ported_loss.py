"""Tests ported from Apache MXNet's tests/python/unittest/test_loss.py (tag 1.9.1).

The 1.9.1 originals train a symbol through ``mx.mod.Module.fit`` and read ``mod.score`` with
``mx.metric.Loss``. Here the same network (FullyConnected 128 -> ReLU -> 64 -> ReLU -> n) is a
HybridSequential of Dense layers trained by the Gluon loop that ``Module.fit`` amounts to: the
same optimizer, learning rate, initializer (Module's default is ``Uniform(0.01)``), batch size,
number of epochs and gradient rescaling (``1 / batch_size``), with batches from a DataLoader in
place of ``NDArrayIter``; the score is ``metric.Loss`` over the same batches.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import autograd, data, init, loss, metric, nn

from conftest import assert_close


def get_net(num_hidden, flatten=True):
    net = nn.HybridSequential()
    net.add(nn.Dense(128, activation="relu", flatten=flatten),
            nn.Dense(64, activation="relu", flatten=flatten),
            nn.Dense(num_hidden, flatten=flatten))
    return net


def fit(net, compute_loss, dataset, num_epoch, optimizer="adam", learning_rate=0.01, batch_size=10,
        shuffle=False, initializer=None, trainer=None):
    """What ``Module.fit`` does for a loss symbol; returns the Trainer."""
    if trainer is None:
        net.initialize(initializer if initializer is not None else init.Uniform(0.01))
        net.hybridize()
        trainer = hybrid.Trainer(net.collect_params(), optimizer, {"learning_rate": learning_rate})
    loader = data.DataLoader(dataset, batch_size=batch_size, shuffle=shuffle)
    for _ in range(num_epoch):
        for batch in loader:
            with autograd.record():
                l = compute_loss(net, *batch)
            autograd.backward(l)
            trainer.step(batch[0].shape[0])
    return trainer


def score(net, compute_loss, dataset, batch_size=10):
    """``mod.score(data_iter, mx.metric.Loss())``: the mean loss over the batches."""
    m = metric.Loss()
    for batch in data.DataLoader(dataset, batch_size=batch_size):
        m.update(None, compute_loss(net, *batch))
    return m.get()[1]


def uniform(rng, low, high, shape):
    return rng.uniform(low, high, shape).astype(np.float32)


def test_loss_ndarray():
    """Port of test_loss.py::test_loss_ndarray (apache/mxnet 1.9.1)."""
    output = jnp.array([1, 2, 3, 4], jnp.float32)
    label = jnp.array([1, 3, 5, 7], jnp.float32)
    weighting = jnp.array([0.5, 1, 0.5, 1], jnp.float32)

    l = loss.L1Loss()
    assert jnp.sum(l(output, label)).item() == 6.
    l = loss.L1Loss(weight=0.5)
    assert jnp.sum(l(output, label)).item() == 3.
    l = loss.L1Loss()
    assert jnp.sum(l(output, label, weighting)).item() == 5.

    l = loss.L2Loss()
    assert jnp.sum(l(output, label)).item() == 7.
    l = loss.L2Loss(weight=0.25)
    assert jnp.sum(l(output, label)).item() == 1.75
    l = loss.L2Loss()
    assert jnp.sum(l(output, label, weighting)).item() == 6

    output = jnp.array([[0, 2], [1, 4]], jnp.float32)
    label = jnp.array([0, 1])
    weighting = jnp.array([[0.5], [1.0]])

    l = loss.SoftmaxCrossEntropyLoss()
    L = np.asarray(l(output, label))
    assert_close(L, np.array([2.12692809, 0.04858733]), rtol=1e-3, atol=1e-4)
    L = np.asarray(l(output, label, weighting))
    assert_close(L, np.array([1.06346405, 0.04858733]), rtol=1e-3, atol=1e-4)


def test_ce_loss():
    """Port of test_loss.py::test_ce_loss (apache/mxnet 1.9.1)."""
    rng = np.random.default_rng(0)
    nclass, N = 10, 20
    dataset = data.ArrayDataset(uniform(rng, -1, 1, (N, nclass)), rng.integers(0, nclass, N).astype(np.int32))
    Loss = loss.SoftmaxCrossEntropyLoss()
    compute = lambda net, x, y: Loss(net(x), y)  # noqa: E731
    net = get_net(nclass)
    fit(net, compute, dataset, 200, initializer=init.Xavier(magnitude=2))
    assert score(net, compute, dataset) < 0.05


def test_bce_loss():
    """Port of test_loss.py::test_bce_loss (apache/mxnet 1.9.1)."""
    rng = np.random.default_rng(1)
    N = 20
    dataset = data.ArrayDataset(uniform(rng, -1, 1, (N, 20)), rng.integers(0, 2, N).astype(np.float32))
    Loss = loss.SigmoidBinaryCrossEntropyLoss()
    compute = lambda net, x, y: Loss(net(x), y)  # noqa: E731
    net = get_net(1)
    fit(net, compute, dataset, 200, initializer=init.Xavier(magnitude=2))
    assert score(net, compute, dataset) < 0.01

    x = uniform(rng, -5, 5, (10,))
    label = uniform(rng, 0, 1, (10,))
    mx_bce_loss = np.asarray(Loss(x, label))
    prob_npy = 1.0 / (1.0 + np.exp(-x))
    npy_bce_loss = -label * np.log(prob_npy) - (1 - label) * np.log(1 - prob_npy)
    assert_close(mx_bce_loss, npy_bce_loss, rtol=1e-4, atol=1e-5)


def test_bce_equal_ce2():
    """Port of test_loss.py::test_bce_equal_ce2 (apache/mxnet 1.9.1)."""
    rng = np.random.default_rng(2)
    N = 100
    loss1 = loss.SigmoidBCELoss(from_sigmoid=True)
    loss2 = loss.SoftmaxCELoss(from_logits=True)
    out1 = jnp.asarray(uniform(rng, 0.1, 0.9, (N, 1)))
    out2 = jnp.log(jnp.concatenate([1 - out1, out1], axis=1) + 1e-8)
    label = jnp.round(jnp.asarray(uniform(rng, 0, 1, (N, 1))))
    assert_close(np.asarray(loss1(out1, label)), np.asarray(loss2(out2, label)))


def test_logistic_loss_equal_bce():
    """Port of test_loss.py::test_logistic_loss_equal_bce (apache/mxnet 1.9.1)."""
    rng = np.random.default_rng(3)
    N = 100
    loss_binary = loss.LogisticLoss(label_format="binary")
    loss_signed = loss.LogisticLoss(label_format="signed")
    loss_bce = loss.SigmoidBCELoss(from_sigmoid=False)
    x = jnp.asarray(uniform(rng, -10, 10, (N, 1)))
    label = jnp.round(jnp.asarray(uniform(rng, 0, 1, (N, 1))))
    assert_close(np.asarray(loss_binary(x, label)), np.asarray(loss_bce(x, label)), atol=1e-6)
    assert_close(np.asarray(loss_signed(x, 2 * label - 1)), np.asarray(loss_bce(x, label)), atol=1e-6)


def test_kl_loss():
    """Port of test_loss.py::test_kl_loss (apache/mxnet 1.9.1); the symbol's ``log_softmax`` on the
    network output is ``jax.nn.log_softmax``."""
    rng = np.random.default_rng(4)
    N = 20
    label = np.asarray(jax.nn.softmax(uniform(rng, 0, 1, (N, 2))))
    dataset = data.ArrayDataset(uniform(rng, -1, 1, (N, 10)), label)
    Loss = loss.KLDivLoss()
    compute = lambda net, x, y: Loss(jax.nn.log_softmax(net(x)), y)  # noqa: E731
    net = get_net(2)
    fit(net, compute, dataset, 200)
    assert score(net, compute, dataset) < 0.05


def test_l2_loss():
    """Port of test_loss.py::test_l2_loss (apache/mxnet 1.9.1)."""
    rng = np.random.default_rng(5)
    N = 20
    dataset = data.ArrayDataset(uniform(rng, -1, 1, (N, 10)), uniform(rng, -1, 1, (N, 1)))
    Loss = loss.L2Loss()
    compute = lambda net, x, y: Loss(net(x), y)  # noqa: E731
    net = get_net(1)
    fit(net, compute, dataset, 200, shuffle=True, initializer=init.Xavier(magnitude=2))
    assert score(net, compute, dataset) < 0.05


def test_l1_loss():
    """Port of test_loss.py::test_l1_loss (apache/mxnet 1.9.1)."""
    rng = np.random.default_rng(6)
    N = 20
    dataset = data.ArrayDataset(uniform(rng, -1, 1, (N, 10)), uniform(rng, -1, 1, (N, 1)))
    Loss = loss.L1Loss()
    compute = lambda net, x, y: Loss(net(x), y)  # noqa: E731
    net = get_net(1)
    fit(net, compute, dataset, 200, shuffle=True, initializer=init.Xavier(magnitude=2))
    assert score(net, compute, dataset) < 0.1


def test_ctc_loss():
    """Port of test_loss.py::test_ctc_loss (apache/mxnet 1.9.1).

    Documented difference applied (porting-from-gluon.md, gluon.loss, label checks): the last
    three cases have the blank class 3 inside a label (``[3, 2, 2]`` with length 3); a loss
    that is not hybridized raises ValueError for it, a hybridized one (which checks label values
    only in ``check_label_values`` mode) returns MXNet's values."""
    expected = np.array([18.82820702, 16.50581741])
    l = loss.CTCLoss()
    out = l(jnp.ones((2, 20, 4)), jnp.array([[1, 0, -1, -1], [2, 1, 1, -1]]))
    assert_close(np.asarray(out), expected)

    l = loss.CTCLoss(layout="TNC")
    out = l(jnp.ones((20, 2, 4)), jnp.array([[1, 0, -1, -1], [2, 1, 1, -1]]))
    assert_close(np.asarray(out), expected)

    l = loss.CTCLoss(layout="TNC", label_layout="TN")
    out = l(jnp.ones((20, 2, 4)), jnp.array([[1, 0, -1, -1], [2, 1, 1, -1]]).T)
    assert_close(np.asarray(out), expected)

    l = loss.CTCLoss()
    args = (jnp.ones((2, 20, 4)), jnp.array([[2, 1, 2, 2], [3, 2, 2, 2]]), None, jnp.array([2, 3]))
    with pytest.raises(ValueError, match="blank"):
        l(*args)
    l.hybridize()
    assert_close(np.asarray(l(*args)), expected)

    l = loss.CTCLoss()
    args = (jnp.ones((2, 25, 4)), jnp.array([[2, 1, -1, -1], [3, 2, 2, -1]]), jnp.array([20, 20]))
    with pytest.raises(ValueError, match="blank"):
        l(*args)
    l.hybridize()
    assert_close(np.asarray(l(*args)), expected)

    l = loss.CTCLoss()
    args = (jnp.ones((2, 25, 4)), jnp.array([[2, 1, 3, 3], [3, 2, 2, 3]]), jnp.array([20, 20]), jnp.array([2, 3]))
    with pytest.raises(ValueError, match="blank"):
        l(*args)
    l.hybridize()
    assert_close(np.asarray(l(*args)), expected)


def test_ctc_loss_train():
    """Port of test_loss.py::test_ctc_loss_train (apache/mxnet 1.9.1)."""
    rng = np.random.default_rng(7)
    N = 20
    label = np.repeat(np.arange(4), N).reshape((N, 4)).astype(np.float32)
    dataset = data.ArrayDataset(uniform(rng, -1, 1, (N, 20, 10)), label)
    Loss = loss.CTCLoss(layout="NTC", label_layout="NT")
    compute = lambda net, x, y: Loss(net(x), y)  # noqa: E731
    net = get_net(5, False)
    fit(net, compute, dataset, 200, shuffle=True, initializer=init.Xavier(magnitude=2))
    assert score(net, compute, dataset) < 10


def test_sample_weight_loss():
    """Port of test_loss.py::test_sample_weight_loss (apache/mxnet 1.9.1). As with the original's
    ``NDArrayIter``, the two scores pair ``data[10:]`` and ``data[:10]`` with the first ten labels
    and weights (all 1)."""
    rng = np.random.default_rng(8)
    nclass, N = 10, 20
    x = uniform(rng, -1, 1, (N, nclass))
    label = rng.integers(0, nclass, N).astype(np.int32)
    weight = np.array([1 for _ in range(10)] + [0 for _ in range(10)], np.float32)
    Loss = loss.SoftmaxCrossEntropyLoss()
    compute = lambda net, x, y, w: Loss(net(x), y, w)  # noqa: E731
    net = get_net(nclass)
    fit(net, compute, data.ArrayDataset(x, label, weight), 200)
    assert score(net, compute, data.ArrayDataset(x[10:], label[:10], weight[:10])) > 1
    assert score(net, compute, data.ArrayDataset(x[:10], label[:10], weight[:10])) < 0.05


def test_saveload(tmp_path):
    """Port of test_loss.py::test_saveload (apache/mxnet 1.9.1): ``Module.save_checkpoint`` with
    optimizer states and ``Module.load`` are ``save_parameters``/``save_states`` and
    ``load_parameters``/``load_states``."""
    rng = np.random.default_rng(9)
    nclass, N = 10, 20
    dataset = data.ArrayDataset(uniform(rng, -1, 1, (N, nclass)), rng.integers(0, nclass, N).astype(np.int32))
    Loss = loss.SoftmaxCrossEntropyLoss()
    compute = lambda net, x, y: Loss(net(x), y)  # noqa: E731
    net = get_net(nclass)
    trainer = fit(net, compute, dataset, 100, optimizer="sgd", learning_rate=1.)
    net.save_parameters(str(tmp_path / "test-0100.params"))
    trainer.save_states(str(tmp_path / "test-0100.states"))

    net = get_net(nclass)
    net.load_parameters(str(tmp_path / "test-0100.params"))
    net.hybridize()
    trainer = hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": 1.})
    trainer.load_states(str(tmp_path / "test-0100.states"))
    fit(net, compute, dataset, 100, trainer=trainer)
    assert score(net, compute, dataset) < 0.05


def test_huber_loss():
    """Port of test_loss.py::test_huber_loss (apache/mxnet 1.9.1)."""
    rng = np.random.default_rng(10)
    N = 20
    dataset = data.ArrayDataset(uniform(rng, -1, 1, (N, 10)), uniform(rng, -1, 1, (N, 1)))
    Loss = loss.HuberLoss()
    compute = lambda net, x, y: Loss(net(x), y)  # noqa: E731
    net = get_net(1)
    fit(net, compute, dataset, 200, shuffle=True, initializer=init.Xavier(magnitude=2))
    assert score(net, compute, dataset) < 0.05


def test_hinge_loss():
    """Port of test_loss.py::test_hinge_loss (apache/mxnet 1.9.1)."""
    rng = np.random.default_rng(11)
    N = 20
    dataset = data.ArrayDataset(uniform(rng, -1, 1, (N, 10)), np.sign(uniform(rng, -1, 1, (N, 1))))
    Loss = loss.HingeLoss()
    compute = lambda net, x, y: Loss(net(x), y)  # noqa: E731
    net = get_net(1)
    fit(net, compute, dataset, 200, shuffle=True, initializer=init.Xavier(magnitude=2))
    assert score(net, compute, dataset) < 0.06


def test_squared_hinge_loss():
    """Port of test_loss.py::test_squared_hinge_loss (apache/mxnet 1.9.1)."""
    rng = np.random.default_rng(12)
    N = 20
    dataset = data.ArrayDataset(uniform(rng, -1, 1, (N, 10)), np.sign(uniform(rng, -1, 1, (N, 1))))
    Loss = loss.SquaredHingeLoss()
    compute = lambda net, x, y: Loss(net(x), y)  # noqa: E731
    net = get_net(1)
    fit(net, compute, dataset, 200, shuffle=True, initializer=init.Xavier(magnitude=2))
    assert score(net, compute, dataset) < 0.05


def test_triplet_loss():
    """Port of test_loss.py::test_triplet_loss (apache/mxnet 1.9.1)."""
    rng = np.random.default_rng(13)
    N = 20
    dataset = data.ArrayDataset(uniform(rng, -1, 1, (N, 10)), uniform(rng, -1, 1, (N, 10)),
                                uniform(rng, -1, 1, (N, 10)))
    Loss = loss.TripletLoss()
    compute = lambda net, x, pos, neg: Loss(net(x), pos, neg)  # noqa: E731
    net = get_net(10)
    fit(net, compute, dataset, 200, shuffle=True, initializer=init.Xavier(magnitude=2))
    assert score(net, compute, dataset) < 0.05


def test_sdml_loss():
    """Port of test_loss.py::test_sdml_loss (apache/mxnet 1.9.1)."""
    rng = np.random.default_rng(14)
    N, DIM, EPOCHS = 5, 10, 20
    x = uniform(rng, -1, 1, (N, DIM))
    pos = x + uniform(rng, -0.1, 0.1, (N, DIM))
    data_iter = data.DataLoader(data.ArrayDataset(x, pos), batch_size=N)

    sdml_loss = loss.SDMLLoss()
    model = nn.Dense(DIM, activation="tanh")
    model.initialize(init.Xavier())
    trainer = hybrid.Trainer(model.collect_params(), "adam", {"learning_rate": 0.1})
    for _ in range(EPOCHS):
        for batch_x, batch_pos in data_iter:
            with autograd.record():
                z_data, z_pos = model(batch_x), model(batch_pos)
                l = sdml_loss(z_data, z_pos)
            autograd.backward(l)
            trainer.step(1)

    avg_loss = l.sum() / len(l)
    assert avg_loss < 0.05


def test_cosine_loss():
    """Port of test_loss.py::test_cosine_loss (apache/mxnet 1.9.1): the output is ``(N, 1)``, as
    in MXNet 1.9.1 (porting-from-gluon.md, gluon.loss)."""
    rng = np.random.default_rng(15)
    input1 = rng.standard_normal((3, 2)).astype(np.float32)
    input2 = rng.standard_normal((3, 2)).astype(np.float32)
    label = np.sign(rng.standard_normal(input1.shape[0])).astype(np.float32)
    Loss = loss.CosineEmbeddingLoss()
    out = Loss(input1, input2, label)

    numerator = np.sum(input1 * input2, keepdims=True, axis=1)
    denominator = np.sqrt(np.sum(input1 ** 2, axis=1, keepdims=True)) * \
        np.sqrt(np.sum(input2 ** 2, axis=1, keepdims=True))
    numpy_loss = np.where(label[:, None] == 1, 1 - numerator / denominator,
                          np.maximum(np.array([0]), numerator / denominator))
    assert_close(np.asarray(out), numpy_loss, rtol=1e-3, atol=1e-5)


def test_poisson_nllloss():
    """Port of test_loss.py::test_poisson_nllloss (apache/mxnet 1.9.1): one mean over all elements,
    as MXNet 1.9.1 (porting-from-gluon.md, gluon.loss)."""
    rng = np.random.default_rng(16)
    shape = (3, 4)
    pred = rng.standard_normal(shape).astype(np.float32)
    pred = pred + np.abs(np.min(pred))
    target = rng.standard_normal(shape).astype(np.float32)
    target = target + np.abs(np.min(target))

    Loss = loss.PoissonNLLLoss(from_logits=True)
    Loss_no_logits = loss.PoissonNLLLoss(from_logits=False)

    brute_loss = np.mean(np.exp(pred) - target * pred)
    loss_withlogits = Loss(pred, target)
    assert_close(brute_loss, loss_withlogits.item())

    loss_no_logits = Loss_no_logits(pred, target)
    np_loss_no_logits = np.mean(pred - target * np.log(pred + 1e-08))
    if np.isnan(loss_no_logits.item()):
        assert np.isnan(np_loss_no_logits) == np.isnan(loss_no_logits.item())
    else:
        assert_close(np_loss_no_logits, loss_no_logits.item())

    shape = (2, 3)
    np_pred = rng.uniform(1, 5, shape)
    np_target = rng.uniform(1, 5, shape)
    np_compute_full = np.mean((np_pred - np_target * np.log(np_pred + 1e-08)) +
                              ((np_target * np.log(np_target) - np_target + 0.5 * np.log(2 * np_target * np.pi)) *
                               (np_target > 1)))
    Loss_compute_full = loss.PoissonNLLLoss(from_logits=False, compute_full=True)
    loss_compute_full = Loss_compute_full(jnp.asarray(np_pred, jnp.float32), jnp.asarray(np_target, jnp.float32))
    assert_close(np_compute_full, loss_compute_full.item())


def test_poisson_nllloss_mod():
    """Port of test_loss.py::test_poisson_nllloss_mod (apache/mxnet 1.9.1); the symbol's ``exp`` of
    the network output is ``jnp.exp``."""
    rng = np.random.default_rng(17)
    N = 1000
    dataset = data.ArrayDataset(rng.poisson(1.0, (N, 2)).astype(np.float32),
                                rng.poisson(4.0, (N, 1)).astype(np.float32))
    Loss = loss.PoissonNLLLoss(from_logits=False)
    compute = lambda net, x, y: Loss(jnp.exp(net(x)), y)  # noqa: E731
    net = get_net(1)
    fit(net, compute, dataset, 20, batch_size=20, shuffle=True, initializer=init.Normal(sigma=0.1))
    assert score(net, compute, dataset, batch_size=20) < 0.05


def test_bce_loss_with_pos_weight():
    """Port of test_loss.py::test_bce_loss_with_pos_weight (apache/mxnet 1.9.1). The last
    incomplete batch is kept as it is (``NDArrayIter`` pads it with samples from the start)."""
    rng = np.random.default_rng(18)
    N = int(rng.integers(5, 30))
    x = uniform(rng, -1, 1, (N, 20))
    label = rng.integers(0, 2, (N, 5)).astype(np.float32)
    pos_weight = np.repeat(uniform(rng, 0, 10, (1, 5)), N, axis=0)
    dataset = data.ArrayDataset(x, label, pos_weight)
    Loss = loss.SigmoidBinaryCrossEntropyLoss()
    compute = lambda net, x, y, pos_w: Loss(net(x), y, None, pos_w)  # noqa: E731
    net = get_net(5)
    fit(net, compute, dataset, 200, initializer=init.Xavier(magnitude=2))
    assert score(net, compute, dataset) < 0.01

    x = uniform(rng, -5, 5, (N, 5))
    label = rng.integers(0, 2, (N, 5)).astype(np.float32)
    pos_weight = uniform(rng, 0, 10, (1, 5))
    mx_bce_loss = np.asarray(Loss(x, label, None, pos_weight))
    prob_npy = 1.0 / (1.0 + np.exp(-x))
    npy_bce_loss = (-label * np.log(prob_npy) * pos_weight - (1 - label) * np.log(1 - prob_npy)).mean(axis=1)
    assert_close(mx_bce_loss, npy_bce_loss, rtol=1e-4, atol=1e-5)
