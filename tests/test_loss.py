"""Losses against NumPy references (float64): L2, L1, softmax and sigmoid cross-entropy, KLDiv, Huber,
hinge, logistic, triplet, Poisson, cosine-embedding and CTC; eager and hybridized, with weights and
gradients."""
import itertools

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


# -- NumPy references (float64) ----------------------------------------------------------------
def np_kl(pred, label, from_logits=True):
    logp = pred if from_logits else ref.log_softmax(pred, axis=-1)
    return (label * (np.log(label + 1e-12) - logp)).sum(axis=1)  # MXNet 1.9.1 sums over non-batch axes


def np_huber(pred, label, rho):
    d = np.abs(label - pred)
    return np.where(d <= rho, d ** 2 / (2 * rho), d - rho / 2).mean(axis=1)


def np_hinge(pred, label, margin, power):
    return (np.maximum(0.0, margin - pred * label) ** power).mean(axis=1)


def np_logistic(pred, signed_label):
    return np.log1p(np.exp(-pred * signed_label)).mean(axis=1)


def np_triplet(pred, pos, neg, margin):
    d = ((pos - pred) ** 2).reshape(len(pred), -1).sum(1) - ((neg - pred) ** 2).reshape(len(pred), -1).sum(1)
    return np.maximum(d + margin, 0.0)


def np_poisson(pred, target, from_logits, full):
    out = np.exp(pred) - target * pred if from_logits else pred - target * np.log(pred + 1e-8)
    if full:
        stirling = np.zeros_like(target)
        big = target > 1
        t = target[big]
        stirling[big] = t * np.log(t) - t + 0.5 * np.log(2 * np.pi * t)
        out = out + stirling
    return np.array([out.mean()])  # MXNet 1.9.1: one mean over all elements, shape (1,)


def np_cosine_embedding(a, b, label, margin):
    cos = (a * b).sum(-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-12)
    out = np.where(label == 1, 1 - cos, np.where(label == -1, np.maximum(0.0, cos - margin), 0.0))
    return out.reshape(-1, 1)  # MXNet 1.9.1: shape (N, 1)


def np_ctc_dp(scores, label):
    """-log p(label | scores) for one sequence: scores (T, C) before softmax, blank = C - 1;
    the textbook alpha recursion in probability space."""
    probs = np.exp(ref.log_softmax(scores, axis=-1))
    steps, classes = probs.shape
    blank = classes - 1
    ext = [blank]
    for symbol in label:
        ext += [symbol, blank]
    alpha = np.zeros((steps, len(ext)))
    alpha[0, 0] = probs[0, blank]
    if len(ext) > 1:
        alpha[0, 1] = probs[0, ext[1]]
    for t in range(1, steps):
        for s in range(len(ext)):
            total = alpha[t - 1, s] + (alpha[t - 1, s - 1] if s >= 1 else 0.0)
            if s >= 2 and ext[s] != blank and ext[s] != ext[s - 2]:
                total += alpha[t - 1, s - 2]
            alpha[t, s] = total * probs[t, ext[s]]
    likelihood = alpha[-1, -1] + (alpha[-1, -2] if len(ext) > 1 else 0.0)
    return -np.log(likelihood)


def np_ctc_brute_force(scores, label):
    """-log of the summed probability of every path that collapses to ``label``."""
    probs = np.exp(ref.log_softmax(scores, axis=-1))
    steps, classes = probs.shape
    blank = classes - 1
    total = 0.0
    for path in itertools.product(range(classes), repeat=steps):
        collapsed = [k for i, k in enumerate(path) if k != blank and (i == 0 or path[i - 1] != k)]
        if collapsed == list(label):
            total += np.prod(probs[np.arange(steps), path])
    return -np.log(total)


# -- helpers ---------------------------------------------------------------------------------------
def loss_grad(loss_fn, pred, *rest):
    """d sum(loss_fn(pred, *rest)) / d pred through the autograd tape."""
    block = Logits(pred.astype(np.float32))
    block.initialize()
    with autograd.record():
        out = loss_fn(block(), *rest)
    autograd.backward(out)
    return np.asarray(block.z.grad())


def numeric_grad(fn, x, eps=1e-6):
    """Central differences of sum(fn(x)) in float64."""
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[index] += eps
        down[index] -= eps
        grad[index] = (fn(up).sum() - fn(down).sum()) / (2 * eps)
    return grad


def maybe_hybridize(block, hybridize):
    if hybridize:
        block.hybridize()
    return block


@pytest.fixture
def signed_data(rng):
    pred = rng.standard_normal((5, 4))
    signed = rng.choice([-1.0, 1.0], (5, 4))
    weights = rng.uniform(0.5, 2, (5, 1))
    return pred, signed, weights


f32 = lambda *arrays: [np.asarray(a, np.float32) for a in arrays]


# -- elementwise losses -----------------------------------------------------------------------------
@pytest.mark.parametrize("hybridize", [False, True])
def test_kl_div(signed_data, rng, hybridize):
    pred, _, weights = signed_data
    label = np.exp(ref.log_softmax(rng.standard_normal((5, 4))))
    logp = ref.log_softmax(pred)
    kl = maybe_hybridize(loss.KLDivLoss(), hybridize)
    kl_scores = maybe_hybridize(loss.KLDivLoss(from_logits=False, weight=2.0), hybridize)
    assert_close(kl(*f32(logp, label)), np_kl(logp, label))
    assert_close(kl_scores(*f32(pred, label, weights)), 2 * weights[:, 0] * np_kl(pred, label, False))


@pytest.mark.parametrize("hybridize", [False, True])
def test_huber(signed_data, hybridize):
    pred, _, weights = signed_data
    label = pred + np.linspace(-3, 3, 20).reshape(5, 4)  # errors on both sides of rho
    huber = maybe_hybridize(loss.HuberLoss(rho=1.5), hybridize)
    assert_close(huber(*f32(pred, label)), np_huber(pred, label, 1.5))
    assert_close(huber(*f32(pred, label, weights)), weights[:, 0] * np_huber(pred, label, 1.5))
    by_columns = loss.HuberLoss(batch_axis=1)(*f32(pred, label))  # batch along axis 1
    assert_close(by_columns, np_huber(pred.T, label.T, 1.0))


@pytest.mark.parametrize("hybridize", [False, True])
def test_hinge_and_squared_hinge(signed_data, hybridize):
    pred, signed, weights = signed_data
    hinge = maybe_hybridize(loss.HingeLoss(margin=0.5), hybridize)
    squared = maybe_hybridize(loss.SquaredHingeLoss(weight=3.0), hybridize)
    assert_close(hinge(*f32(pred, signed)), np_hinge(pred, signed, 0.5, 1))
    assert_close(squared(*f32(pred, signed, weights)), 3 * weights[:, 0] * np_hinge(pred, signed, 1.0, 2))


@pytest.mark.parametrize("hybridize", [False, True])
def test_logistic_signed_and_binary(signed_data, hybridize):
    pred, signed, weights = signed_data
    signed_loss = maybe_hybridize(loss.LogisticLoss(), hybridize)
    binary_loss = maybe_hybridize(loss.LogisticLoss(label_format="binary"), hybridize)
    expected = np_logistic(pred, signed)
    assert_close(signed_loss(*f32(pred, signed)), expected)
    assert_close(binary_loss(*f32(pred, (signed + 1) / 2, weights)), weights[:, 0] * expected)
    big = np.array([[80.0, -80.0]], np.float32)  # stable where exp overflows float32
    assert_close(signed_loss(big, np.array([[-1.0, 1.0]], np.float32)), [80.0])
    with pytest.raises(ValueError, match="LogisticLoss: label_format"):
        loss.LogisticLoss(label_format="zero_one")


@pytest.mark.parametrize("hybridize", [False, True])
def test_triplet(rng, hybridize):
    pred, pos, neg = (rng.standard_normal((4, 2, 3)) for _ in range(3))
    triplet = maybe_hybridize(loss.TripletLoss(margin=2.0), hybridize)
    expected = np_triplet(pred, pos, neg, 2.0)
    assert (expected > 0).any() and (expected == 0).any()  # both sides of the hinge are covered
    assert_close(triplet(*f32(pred, pos, neg)), expected)
    assert_close(triplet(*f32(pred, pos.reshape(4, 6), neg)), expected)  # reshaped like pred


@pytest.mark.parametrize("hybridize", [False, True])
def test_poisson_nll(rng, hybridize):
    target = rng.integers(0, 6, (5, 3)).astype(np.float64)
    log_rate = rng.standard_normal((5, 3))
    logits = maybe_hybridize(loss.PoissonNLLLoss(), hybridize)
    full = maybe_hybridize(loss.PoissonNLLLoss(from_logits=False, compute_full=True), hybridize)
    assert_close(logits(*f32(log_rate, target)), np_poisson(log_rate, target, True, False))
    rate = np.exp(log_rate)
    out = np.asarray(full(*f32(rate, target)))
    assert np.isfinite(out).all()  # zero counts do not produce log(0) * 0 = nan
    assert_close(out, np_poisson(rate, target, False, True), rtol=1e-5)


def test_poisson_full_term_approximates_log_factorial():
    target = np.array([[20.0, 50.0]], np.float32)
    rate = np.array([[1.0, 1.0]], np.float32)
    out = loss.PoissonNLLLoss(from_logits=False, compute_full=True)(rate, target)
    exact = np.mean([1 + np.log(np.prod(np.arange(1.0, k + 1))) for k in (20, 50)])  # rate - k log rate + log k!
    assert_close(out, [exact], rtol=1e-3)


@pytest.mark.parametrize("hybridize", [False, True])
def test_cosine_embedding(rng, hybridize):
    a, b = rng.standard_normal((6, 5)), rng.standard_normal((6, 5))
    b[1] = 2 * a[1]  # cos = 1
    label = np.array([1, 1, -1, -1, 1, -1])
    cel = maybe_hybridize(loss.CosineEmbeddingLoss(margin=0.1), hybridize)
    weights = np.linspace(0.5, 1.5, 6).reshape(6, 1)
    assert_close(cel(*f32(a, b, label)), np_cosine_embedding(a, b, label, 0.1))
    assert_close(cel(*f32(a, b), label, np.float32(weights)), weights * np_cosine_embedding(a, b, label, 0.1))
    assert abs(float(cel(*f32(a, b, label))[1, 0])) < 1e-6


@pytest.mark.parametrize("name, make, reference, extra", [
    ("huber", lambda: loss.HuberLoss(rho=0.7), lambda p, y: np_huber(p, y, 0.7), "target"),
    ("logistic", loss.LogisticLoss, np_logistic, "signed"),
    ("kl", lambda: loss.KLDivLoss(from_logits=False), lambda p, y: np_kl(p, y, False), "distribution"),
    ("squared_hinge", loss.SquaredHingeLoss, lambda p, y: np_hinge(p, y, 1.0, 2), "signed"),
])
def test_gradients_match_finite_differences(signed_data, rng, name, make, reference, extra):
    pred, signed, _ = signed_data
    label = {"target": pred + rng.uniform(-2, 2, pred.shape), "signed": signed,
             "distribution": np.exp(ref.log_softmax(rng.standard_normal(pred.shape)))}[extra]
    expected = numeric_grad(lambda p: reference(p, label), pred)
    assert_close(loss_grad(make(), pred, np.float32(label)), expected, rtol=1e-4, atol=1e-5)
    hybrid_loss = make()
    hybrid_loss.hybridize()
    assert_close(loss_grad(hybrid_loss, pred, np.float32(label)), expected, rtol=1e-4, atol=1e-5)


# -- CTC ---------------------------------------------------------------------------------------------
def test_ctc_dp_reference_matches_brute_force(rng):
    scores = rng.standard_normal((4, 3))
    for label in ([0], [0, 1], [1, 1], [0, 0], []):
        assert np.isclose(np_ctc_dp(scores, label), np_ctc_brute_force(scores, label))


@pytest.mark.parametrize("hybridize", [False, True])
def test_ctc_tiny_case_matches_enumeration_of_alignments(rng, hybridize):
    scores = rng.standard_normal((4, 4, 3))  # N=4, T=4, two symbols + blank
    labels = np.array([[0, 1], [1, 1], [0, -1], [-1, -1]])  # a repeated symbol needs a blank between; -1 pads
    ctc = maybe_hybridize(loss.CTCLoss(), hybridize)
    expected = [np_ctc_brute_force(s, label) for s, label in zip(scores, ([0, 1], [1, 1], [0], []))]
    assert_close(ctc(*f32(scores), labels), expected, rtol=1e-5)


def test_ctc_lengths_layouts_and_weights(rng):
    scores = rng.standard_normal((3, 7, 5))  # blank = class 4
    labels = np.array([[0, 2, 2, 1], [3, 1, 0, 0], [1, 0, 3, 3]])
    pred_lengths, label_lengths = np.array([7, 5, 6]), np.array([4, 2, 3])
    expected = np.array([np_ctc_dp(scores[i, :pred_lengths[i]], labels[i, :label_lengths[i]]) for i in range(3)])
    ctc = loss.CTCLoss(weight=0.5)
    assert_close(ctc(*f32(scores), labels, pred_lengths, label_lengths), 0.5 * expected, rtol=1e-5)
    tnc = loss.CTCLoss(layout="TNC", label_layout="TN")
    weights = np.float32([1.0, 2.0, 3.0])
    assert_close(tnc(*f32(scores.transpose(1, 0, 2)), labels.T, pred_lengths, label_lengths, weights),
                 weights * expected, rtol=1e-5)
    full = np.array([np_ctc_dp(scores[i], labels[i]) for i in range(3)])
    assert_close(ctc(*f32(scores), labels), 0.5 * full, rtol=1e-5)


def test_ctc_infeasible_alignment_is_inf_with_zero_gradient(rng):
    scores = rng.standard_normal((2, 3, 3))
    labels = np.array([[0, 0], [0, 1]])  # [0, 0] needs 3 steps; given only 2 in sample 0
    ctc = loss.CTCLoss()
    out = np.asarray(ctc(*f32(scores), labels, np.array([2, 3])))
    assert np.isinf(out[0]) and np.isclose(out[1], np_ctc_dp(scores[1], [0, 1]), rtol=1e-5)
    grad = loss_grad(lambda p, y: ctc(p, y, np.array([2, 3])), scores, labels)
    assert np.isfinite(grad).all() and not grad[0].any()


def test_ctc_gradient_matches_finite_differences(rng):
    scores = rng.standard_normal((2, 5, 4))
    labels = np.array([[0, 2, 2], [1, -1, -1]])
    lengths = np.array([5, 4])
    reference = lambda s: np.array([np_ctc_dp(s[0, :5], [0, 2, 2]), np_ctc_dp(s[1, :4], [1])])
    expected = numeric_grad(reference, scores)
    assert not expected[1, 4].any()  # steps past pred_lengths do not matter
    assert_close(loss_grad(lambda p, y: loss.CTCLoss()(p, y, lengths), scores, labels), expected,
                 rtol=1e-4, atol=1e-5)


def test_ctc_errors():
    with pytest.raises(ValueError, match="CTCLoss: layout"):
        loss.CTCLoss(layout="NCT")
    with pytest.raises(ShapeError, match="batch size 2"):
        loss.CTCLoss()(np.zeros((2, 4, 3), np.float32), np.zeros((3, 2), np.int32))


def test_cosine_embedding_label_of_the_wrong_shape_is_named():
    p = np.ones((4, 3), np.float32)
    with pytest.raises(ShapeError, match=r"CosineEmbeddingLoss: label must hold one entry per sample, shape \(4,\)"):
        loss.CosineEmbeddingLoss()(p, p, np.ones((4, 3), np.float32))
    np.testing.assert_allclose(np.asarray(loss.CosineEmbeddingLoss()(p, p, np.ones(4))), np.zeros((4, 1)), atol=1e-6)
