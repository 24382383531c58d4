import numpy as np
import pytest

from hybrid import HybridBlock, Parameter, autograd, init, loss
from hybrid.errors import ShapeError

import references as ref
from conftest import assert_close


@pytest.fixture
def data(rng):
    pred = rng.standard_normal((6, 4)).astype(np.float32)
    target = rng.standard_normal((6, 4)).astype(np.float32)
    labels = rng.integers(0, 4, 6)
    weights = rng.uniform(0.5, 2, (6, 1)).astype(np.float32)
    return pred, target, labels, weights


@pytest.mark.parametrize("hybridize", [False, True])
def test_l2_and_l1(data, hybridize):
    pred, target, _, weights = data
    l2, l1 = loss.L2Loss(weight=3.0), loss.L1Loss()
    if hybridize:
        l2.hybridize()
        l1.hybridize()
    assert_close(l2(pred, target), (1.5 * (pred - target) ** 2).mean(axis=1))
    assert_close(l2(pred, target, weights), (1.5 * weights * (pred - target) ** 2).mean(axis=1))
    assert_close(l1(pred, target), np.abs(pred - target).mean(axis=1))
    assert_close(l1(pred, target.reshape(6, 2, 2)), np.abs(pred - target).mean(axis=1))  # reshaped like pred


@pytest.mark.parametrize("hybridize", [False, True])
def test_softmax_cross_entropy(data, hybridize):
    pred, _, labels, weights = data
    ce = loss.SoftmaxCrossEntropyLoss()
    dense = loss.SoftmaxCELoss(sparse_label=False, weight=0.5)
    logits = loss.SoftmaxCELoss(from_logits=True)
    if hybridize:
        for block in (ce, dense, logits):
            block.hybridize()
    logp = ref.log_softmax(pred.astype(np.float64))
    expected = -logp[np.arange(6), labels]
    assert_close(ce(pred, labels), expected, rtol=1e-5)
    assert_close(ce(pred, labels, weights), expected * weights[:, 0], rtol=1e-5)
    onehot = np.eye(4)[labels]
    assert_close(dense(pred, onehot), 0.5 * expected, rtol=1e-5)
    assert_close(logits(logp.astype(np.float32), labels), expected, rtol=1e-5)
    seq = loss.SoftmaxCELoss()
    seq_pred = np.stack([pred, pred[::-1]], axis=1)  # (6, 2, 4): per-time-step classes
    seq_labels = np.stack([labels, labels[::-1]], axis=1)
    assert_close(seq(seq_pred, seq_labels), (expected + expected[::-1]) / 2, rtol=1e-5)


class Logits(HybridBlock):
    """A block whose output is its parameter, to take gradients with respect to logits."""

    def __init__(self, value):
        super().__init__()
        self.z = Parameter("z", shape=value.shape, init=init.Constant(value))

    def forward(self):
        return self.z.data()


def test_softmax_cross_entropy_gradient_is_softmax_minus_onehot(data):
    pred, _, labels, _ = data
    block = Logits(pred)
    block.initialize()
    with autograd.record():
        out = loss.SoftmaxCELoss()(block(), labels)
    autograd.backward(out)
    p = np.exp(ref.log_softmax(pred.astype(np.float64)))
    assert_close(block.z.grad(), p - np.eye(4)[labels], rtol=1e-5)


@pytest.mark.parametrize("hybridize", [False, True])
def test_sigmoid_binary_cross_entropy(data, hybridize, rng):
    pred, _, _, weights = data
    label = rng.integers(0, 2, pred.shape).astype(np.float32)
    bce, prob_bce = loss.SigmoidBCELoss(), loss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=True)
    if hybridize:
        bce.hybridize()
        prob_bce.hybridize()
    p = 1 / (1 + np.exp(-pred.astype(np.float64)))
    expected = -(label * np.log(p) + (1 - label) * np.log(1 - p))
    assert_close(bce(pred, label), expected.mean(axis=1), rtol=1e-5)
    assert_close(prob_bce(p.astype(np.float32), label), expected.mean(axis=1), rtol=1e-4)
    pos_weight = np.float32(3.0)
    weighted = -(pos_weight * label * np.log(p) + (1 - label) * np.log(1 - p))
    assert_close(bce(pred, label, None, pos_weight), weighted.mean(axis=1), rtol=1e-5)
    assert_close(prob_bce(p.astype(np.float32), label, weights, pos_weight),
                 (weighted * weights).mean(axis=1), rtol=1e-4)


def test_label_shape_mismatch_is_reported(data):
    pred, *_ = data
    with pytest.raises(ShapeError, match=r"label of shape \(5,\) does not match prediction of shape \(6, 4\)"):
        loss.L2Loss()(pred, np.zeros(5, np.float32))
    with pytest.raises(ShapeError, match="sparse label"):
        loss.SoftmaxCELoss()(pred, np.zeros(7, np.int32))
