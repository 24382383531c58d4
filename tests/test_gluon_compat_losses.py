"""Issue #14 (Gluon compatibility): losses, split_data, batchify.Pad and init against independent
NumPy references written from MXNet 1.9.1's python/mxnet/gluon/loss.py, gluon/utils.py,
gluon/data/batchify.py and initializer.py (never against hybrid itself)."""
import numpy as np
import pytest

from hybrid import loss

from conftest import assert_close


def np_log_softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=axis, keepdims=True))


def maybe_hybridize(block, hybridize):
    if hybridize:
        block.hybridize()
    return block


f32 = lambda *arrays: [np.asarray(a, np.float32) for a in arrays]


# -- KLDivLoss: MXNet 1.9.1 returns F.sum(loss, axis=batch_axis, exclude=True) ------------------
def np_kl_mxnet(pred, label, from_logits=True, axis=-1, weight=None, sample_weight=None, batch_axis=0):
    if not from_logits:
        pred = np_log_softmax(pred, axis)
    out = label * (np.log(label + 1e-12) - pred)
    if sample_weight is not None:
        out = out * sample_weight
    if weight is not None:
        out = out * weight
    axes = tuple(i for i in range(out.ndim) if i != batch_axis)
    return out.sum(axis=axes)


@pytest.mark.parametrize("hybridize", [False, True])
def test_kl_div_sums_over_non_batch_axes(rng, hybridize):
    label = np.exp(np_log_softmax(rng.standard_normal((4, 5))))
    scores = rng.standard_normal((4, 5))
    logp = np_log_softmax(scores)
    weights = rng.uniform(0.5, 2, (4, 1))
    kl = maybe_hybridize(loss.KLDivLoss(), hybridize)
    out = kl(*f32(logp, label))
    assert out.shape == (4,)
    assert_close(out, np_kl_mxnet(logp, label))
    # the textbook KL divergence of each row (not 1/5 of it, as a mean would give)
    assert_close(out, (label * np.log(label / np.exp(logp))).sum(1), rtol=1e-4)
    kl_scores = maybe_hybridize(loss.KLDivLoss(from_logits=False, weight=2.0), hybridize)
    assert_close(kl_scores(*f32(scores, label, weights)),
                 np_kl_mxnet(scores, label, False, weight=2.0, sample_weight=weights))


def test_kl_div_higher_rank_and_batch_axis(rng):
    label = np.exp(np_log_softmax(rng.standard_normal((3, 2, 4))))
    logp = np_log_softmax(rng.standard_normal((3, 2, 4)))
    assert_close(loss.KLDivLoss()(*f32(logp, label)), np_kl_mxnet(logp, label))
    assert_close(loss.KLDivLoss(batch_axis=1)(*f32(logp, label)), np_kl_mxnet(logp, label, batch_axis=1))


# -- PoissonNLLLoss: MXNet 1.9.1 returns F.mean(loss) over every element -------------------------
def np_poisson_mxnet(pred, target, from_logits=True, compute_full=False, weight=None, sample_weight=None):
    out = np.exp(pred) - target * pred if from_logits else pred - target * np.log(pred + 1e-8)
    if compute_full:
        with np.errstate(divide="ignore", invalid="ignore"):
            stirling = target * np.log(target) - target + 0.5 * np.log(2 * target * np.pi)
        out = out + np.where(target > 1, stirling, 0.0)  # MXNet multiplies by (target > 1)
    if sample_weight is not None:
        out = out * sample_weight
    if weight is not None:
        out = out * weight
    return np.array([out.mean()])


@pytest.mark.parametrize("hybridize", [False, True])
def test_poisson_nll_is_one_mean_over_all_elements(rng, hybridize):
    target = rng.integers(0, 6, (5, 3)).astype(np.float64)
    log_rate = rng.standard_normal((5, 3))
    weights = rng.uniform(0.5, 2, (5, 1))
    logits = maybe_hybridize(loss.PoissonNLLLoss(), hybridize)
    out = logits(*f32(log_rate, target))
    assert out.shape == (1,)
    assert_close(out, np_poisson_mxnet(log_rate, target))
    assert_close(logits(*f32(log_rate, target, weights)), np_poisson_mxnet(log_rate, target, sample_weight=weights))
    full = maybe_hybridize(loss.PoissonNLLLoss(weight=0.5, from_logits=False, compute_full=True), hybridize)
    rate = np.exp(log_rate)
    assert_close(full(*f32(rate, target)), np_poisson_mxnet(rate, target, False, True, weight=0.5), rtol=1e-5)


# -- CosineEmbeddingLoss: MXNet 1.9.1 returns shape (N, 1) --------------------------------------
def np_cosine_mxnet(a, b, label, margin=0.0, weight=None, sample_weight=None):
    label = label.reshape(-1, 1)
    cos = ((a * b).sum(-1).reshape(-1, 1)
           / np.maximum(np.linalg.norm(a, axis=-1).reshape(-1, 1) * np.linalg.norm(b, axis=-1).reshape(-1, 1),
                        1e-12))
    out = (1 - cos) * (label == 1) + np.maximum(0.0, (label == -1) * (cos - margin))
    if sample_weight is not None:
        out = out * sample_weight
    if weight is not None:
        out = out * weight
    return out


@pytest.mark.parametrize("hybridize", [False, True])
def test_cosine_embedding_shape_n_by_1(rng, hybridize):
    a, b = rng.standard_normal((6, 5)), rng.standard_normal((6, 5))
    label = np.array([1, 1, -1, -1, 1, -1])
    weights = np.linspace(0.5, 1.5, 6).reshape(6, 1)
    cel = maybe_hybridize(loss.CosineEmbeddingLoss(margin=0.1, weight=3.0), hybridize)
    out = cel(*f32(a, b, label))
    assert out.shape == (6, 1)
    assert_close(out, np_cosine_mxnet(a, b, label, 0.1, weight=3.0))
    assert_close(cel(*f32(a, b, label, weights)), np_cosine_mxnet(a, b, label, 0.1, 3.0, weights))


# -- SDMLLoss ------------------------------------------------------------------------------------
def np_sdml(x1, x2, smoothing=0.3):
    n = len(x1)
    dist = ((x1[:, None, :] - x2[None, :, :]) ** 2).sum(2)
    logp = np_log_softmax(-dist, axis=1)
    gold = np.eye(n)
    labels = gold * (1 - smoothing) + (1 - gold) * smoothing / (n - 1)
    return np_kl_mxnet(logp, labels)


@pytest.mark.parametrize("hybridize", [False, True])
def test_sdml_loss(rng, hybridize):
    x1 = rng.standard_normal((6, 4))
    x2 = x1 + 0.3 * rng.standard_normal((6, 4))
    sdml = maybe_hybridize(loss.SDMLLoss(), hybridize)
    out = sdml(*f32(x1, x2))
    assert out.shape == (6,)
    assert_close(out, np_sdml(x1, x2), rtol=1e-4)
    assert_close(loss.SDMLLoss(smoothing_parameter=0.1)(*f32(x1, x2)), np_sdml(x1, x2, 0.1), rtol=1e-4)
    # aligned pairs give a smaller loss than shuffled ones
    assert float(out.mean()) < float(np.asarray(sdml(*f32(x1, x2[::-1]))).mean())


# -- utils.split_data: MXNet 1.9.1 uses np.array_split's section sizes on any axis ----------------
@pytest.mark.parametrize("shape, num_slice, axis", [
    ((11, 3), 4, 0), ((3, 11), 4, 1), ((2, 10, 3), 3, 1), ((2, 3, 7), 5, -1), ((2, 3), 5, 0),
    ((8, 2), 4, 0), ((4, 9, 2), 9, 1)])
@pytest.mark.parametrize("as_jax", [False, True])
def test_split_data_matches_np_array_split(shape, num_slice, axis, as_jax):
    import jax.numpy as jnp
    from hybrid import utils
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    parts = utils.split_data(jnp.asarray(x) if as_jax else x, num_slice, batch_axis=axis, even_split=False)
    expected = np.array_split(x, num_slice, axis=axis)
    assert len(parts) == len(expected) == num_slice
    for got, want in zip(parts, expected):
        assert got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), want)


def test_split_data_sizes_3_3_3_2():
    from hybrid import utils
    parts = utils.split_data(np.zeros((3, 11)), 4, batch_axis=1, even_split=False)
    assert [p.shape[1] for p in parts] == [3, 3, 3, 2]


# -- data.batchify.Pad: Gluon 2.0 pads every axis to the largest shape ----------------------------
def np_pad_all_axes(samples, val, round_to=None):
    arrays = [np.asarray(s) for s in samples]
    shape = np.max([a.shape for a in arrays], axis=0)
    if round_to:
        shape = -(-shape // round_to) * round_to
    return np.stack([np.pad(a, [(0, int(n) - m) for n, m in zip(shape, a.shape)], constant_values=val)
                     for a in arrays])


def test_batchify_pad_every_axis_mxnet_case():
    from hybrid.data import batchify
    a = np.array([[1, 2, 3, 4], [11, 12, 13, 14]])
    b = np.array([[4, 5, 6]])
    c = np.array([[9, 10]])
    d = batchify.Pad(val=-1)([a, b, c])
    expected = np.array([[[1., 2., 3., 4.], [11., 12., 13., 14.]],  # MXNet's test_batchify_pad
                         [[4., 5., 6., -1.], [-1., -1., -1., -1.]],
                         [[9., 10., -1., -1.], [-1., -1., -1., -1.]]])
    np.testing.assert_array_equal(d, expected)
    assert d.dtype == a.dtype


def test_batchify_group_stack_and_pad_mxnet_case():
    from hybrid.data import batchify
    a = [np.array([[1, 2, 3, 4], [5, 6, 7, 8]]), np.array([[1, 2, 3, 4], [11, 12, 13, 14]])]
    b = [np.array([[1, 2, 3, 4], [5, 6, 7, 8]]), np.array([[4, 5, 6]])]
    c = [np.array([[1, 2, 3, 4], [5, 6, 7, 8]]), np.array([[9, 10]])]
    d = batchify.Group(batchify.Stack(), batchify.Pad(val=-1))([tuple(a), tuple(b), tuple(c)])
    np.testing.assert_array_equal(d[0], np.stack((a[0], b[0], c[0])))
    expected = np.array([[[1., 2., 3., 4.], [11., 12., 13., 14.]],  # MXNet's test_batchify_group
                         [[4., 5., 6., -1.], [-1., -1., -1., -1.]],
                         [[9., 10., -1., -1.], [-1., -1., -1., -1.]]])
    np.testing.assert_array_equal(d[1], expected)


def test_batchify_pad_random_shapes_round_to_and_dtype(rng):
    from hybrid.data import batchify
    samples = [rng.standard_normal(tuple(rng.integers(1, 5, 3))) for _ in range(5)]
    np.testing.assert_allclose(batchify.Pad()(samples), np_pad_all_axes(samples, 0))
    out = batchify.Pad(val=7, dtype="float32", round_to=4)(samples)
    assert out.dtype == np.float32 and all(n % 4 == 0 for n in out.shape[1:])
    np.testing.assert_allclose(out, np_pad_all_axes(samples, 7, round_to=4).astype(np.float32))
    lists = batchify.Pad()([[1, 2, 3, 4], [4, 5, 6], [8, 2]])  # Gluon's docstring example
    np.testing.assert_array_equal(lists, [[1, 2, 3, 4], [4, 5, 6, 0], [8, 2, 0, 0]])
    with pytest.raises(ValueError, match="different ranks"):
        batchify.Pad()([np.zeros(2), np.zeros((2, 2))])


# -- init.LSTMBias and Initializer.__eq__ (MXNet 1.9.1 initializer.py) --------------------------
def np_lstm_bias(n, forget_bias):
    arr = np.zeros(n)  # MXNet: arr[:] = 0; arr[num_hidden:2*num_hidden] = forget_bias
    num_hidden = int(n / 4)
    arr[num_hidden:2 * num_hidden] = forget_bias
    return arr


@pytest.mark.parametrize("hidden, forget_bias", [(3, 1.0), (5, 2.5), (1, -0.5)])
def test_lstm_bias_initializer(hidden, forget_bias):
    from hybrid import init
    got = init.LSTMBias(forget_bias=forget_bias)((4 * hidden,))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(got), np_lstm_bias(4 * hidden, forget_bias))
    assert isinstance(init.create("lstmbias"), init.LSTMBias) and init.create("lstmbias").forget_bias == 1.0
    with pytest.raises(ValueError, match="LSTMBias"):
        init.LSTMBias()((6,))


def test_lstm_bias_lands_on_the_forget_gate_of_an_lstm_cell():
    """Gate order i, f, g, o: with a forget bias of 100 and zero weights the forget gate is 1
    and the input gate 0.5, so c' = c + 0.5 * tanh(0) = c."""
    import jax.numpy as jnp
    from hybrid import init, rnn
    cell = rnn.LSTMCell(2, input_size=3, i2h_weight_initializer="zeros", h2h_weight_initializer="zeros",
                        i2h_bias_initializer=init.LSTMBias(100.0))
    cell.initialize()
    bias = [p for name, p in cell.collect_params().items() if name.endswith("i2h_bias")][0]
    np.testing.assert_array_equal(np.asarray(bias.data()), np_lstm_bias(8, 100.0))
    c = jnp.asarray([[0.7, -0.3]], jnp.float32)
    _, (h, c_new) = cell(jnp.ones((1, 3), jnp.float32), [jnp.zeros((1, 2), jnp.float32), c])
    np.testing.assert_allclose(np.asarray(c_new), np.asarray(c), rtol=1e-6)


def test_initializer_equality():
    from hybrid import init
    assert init.LSTMBias(1.0) == init.LSTMBias(1.0)
    assert init.LSTMBias(1.0) != init.LSTMBias(2.0)
    assert init.Uniform(0.1) == init.Uniform(0.1) and init.Uniform(0.1) != init.Uniform(0.2)
    assert init.Xavier(magnitude=2) == init.Xavier(magnitude=2.0)
    assert init.Xavier() != init.Xavier(factor_type="in")
    assert init.Zero() != init.One() and init.Zero() == init.Zero()
    assert init.Zero() != init.Constant(0.0)  # different classes, as MXNet's type check
    assert init.Constant(np.arange(3.0)) == init.Constant(np.arange(3.0))
    assert init.Constant(np.arange(3.0)) != init.Constant(np.ones(3))
    assert init.Normal() != "normal"
    assert len({init.Normal(0.5), init.Normal(0.5)}) == 1  # still hashable
