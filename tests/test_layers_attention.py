"""Multi-head attention and the transformer encoder layer (hybrid/nn/attention.py): forward against
NumPy with every kind of mask, hybridized against eager (outputs and gradients), gradients against
finite differences of the NumPy reference, attention dropout, and errors that name the layer."""
import numpy as np
import pytest

from hybrid import autograd, init, nn
from hybrid.errors import ShapeError

import references as ref
import references_nn as refn
from conftest import assert_close
from helpers import LayerCase, clone_params, layer_arrays, layer_case_tests


CASES = [
    LayerCase("multi_head_attention", lambda: nn.MultiHeadAttention(8, 2), (2, 4, 6),
              lambda a: refn.multi_head_attention(a["x"], a["x"], a["x"], a, 2)),
    LayerCase("transformer_post_norm", lambda: nn.TransformerEncoderLayer(8, 12, 2, dropout=0.0), (2, 3, 8),
              lambda a: refn.transformer_encoder(a["x"], a, 2, False, 1e-5, lambda y: np.maximum(y, 0))),
    LayerCase("transformer_pre_norm_gelu", lambda: nn.TransformerEncoderLayer(8, 6, 4, dropout=0.0, activation="gelu",
                                                                              pre_norm=True, layer_norm_eps=1e-3),
              (2, 3, 8), lambda a: refn.transformer_encoder(a["x"], a, 4, True, 1e-3, refn.ACTIVATIONS["gelu_erf"])),
]
globals().update(layer_case_tests(CASES, first_training=True))


def _cross_attention(rng):
    net = nn.MultiHeadAttention(8, 2)
    net.initialize(init.Normal(0.5))
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 5), (2, 4, 6), (2, 4, 7)))
    net(q, k, v)
    return net, (q, k, v)


def test_attention_masks_match_numpy(rng):
    net, (q, k, v) = _cross_attention(rng)
    a = layer_arrays(net, q)
    causal = np.tril(np.ones((3, 4), bool))
    key_mask = np.array([[True, True, False, True], [False, False, False, False]])  # sample 1: all padding
    masks = {"2d": rng.random((3, 4)) > 0.3, "3d": rng.random((2, 3, 4)) > 0.3, "4d": rng.random((2, 2, 3, 4)) > 0.3}
    runs = [(dict(mask=m), m if m.ndim == 4 else (m[None] if m.ndim == 2 else m)[:, None]) for m in masks.values()]
    runs += [(dict(key_mask=key_mask), key_mask[:, None, None]), (dict(causal=True), causal),
             (dict(mask=masks["3d"], key_mask=key_mask, causal=True), masks["3d"][:, None] & key_mask[:, None, None]
              & causal)]
    for kwargs, full_mask in runs:
        expected = refn.multi_head_attention(q, k, v, a, 2, mask=full_mask)
        assert_close(net(q, k, v, **kwargs), expected, rtol=1e-4, atol=1e-5)
    # a query with no key to attend to gets the mean of the values
    values = ref.dense(v.astype(np.float64), a["value_proj.weight"], a["value_proj.bias"], flatten=False)
    mean = ref.dense(values.mean(1), a["out_proj.weight"], a["out_proj.bias"])
    assert_close(net(q, k, v, key_mask=key_mask)[1], np.broadcast_to(mean[1], (3, 8)), rtol=1e-4, atol=1e-5)


def test_attention_hybridized_with_masks_equals_eager(rng):
    eager, inputs = _cross_attention(rng)
    compiled, _ = _cross_attention(rng)
    clone_params(eager, compiled)
    compiled.hybridize()
    kwargs = dict(mask=rng.random((2, 3, 4)) > 0.3, key_mask=np.array([[1, 1, 0, 1], [1, 0, 1, 1]], bool))
    results = []
    for net in (eager, compiled):
        with autograd.record():
            out = net(*inputs, **kwargs, causal=True)
        autograd.backward(out, head_grads=np.random.default_rng(0).standard_normal(out.shape).astype(np.float32))
        results.append((np.asarray(out), {n: np.asarray(p.grad()) for n, p in net.collect_params().items()}))
    (out_e, grads_e), (out_h, grads_h) = results
    assert_close(out_h, out_e)
    for name in grads_e:
        assert_close(grads_h[name], grads_e[name], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("hybridize", [False, True])
def test_attention_dropout_drops_attention_weights(hybridize, rng):
    """With identity value/output projections and one-hot values, the output is the attention weights."""
    size = 8
    net = nn.MultiHeadAttention(size, 1, dropout=0.5, use_bias=False, in_units=3, key_units=3, value_units=size)
    net.initialize(init.Normal(1.0))
    for proj in (net.value_proj, net.out_proj):
        proj.weight.set_data(np.eye(size, dtype=np.float32))
    if hybridize:
        net.hybridize()
    q, k = rng.standard_normal((4, size, 3)).astype(np.float32), rng.standard_normal((4, size, 3)).astype(np.float32)
    v = np.broadcast_to(np.eye(size, dtype=np.float32), (4, size, size))
    weights = np.asarray(net(q, k, v))
    assert_close(weights.sum(-1), 1.0)
    dropped = []
    for _ in range(2):
        with autograd.train_mode():
            out = np.asarray(net(q, k, v))
        kept = ~np.isclose(out, 0.0, atol=1e-7)
        assert_close(out[kept], 2 * weights[kept], rtol=1e-4, atol=1e-6)  # survivors scaled by 1 / (1 - rate)
        assert 0.35 < kept.mean() < 0.65
        dropped.append(kept)
    assert not np.array_equal(*dropped)


def test_transformer_masks_and_dropout(rng):
    net = nn.TransformerEncoderLayer(8, 12, 2, dropout=0.5)
    net.initialize(init.Normal(0.5))
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    key_mask = np.array([[1, 1, 0], [1, 1, 1]], bool)
    net(x)
    expected = refn.transformer_encoder(x.astype(np.float64), layer_arrays(net, x), 2, False, 1e-5,
                                        lambda y: np.maximum(y, 0), mask=key_mask[:, None, None])
    predicted = np.asarray(net(x, key_mask=key_mask))
    assert_close(predicted, expected, rtol=1e-4, atol=1e-5)
    with autograd.train_mode():
        trained = np.asarray(net(x, key_mask=key_mask))
    assert not np.allclose(trained, predicted, atol=1e-3)


def test_bad_attention_masks(rng):
    net, (q, k, v) = _cross_attention(rng)
    with pytest.raises(ShapeError, match=r"MultiHeadAttention: mask must broadcast to \(T, S\) = \(3, 4\)"):
        net(q, k, v, mask=np.ones((4, 3), bool))
    with pytest.raises(ShapeError, match=r"key_mask must have shape \(B, S\) = \(2, 4\), got \(2, 3\)"):
        net(q, k, v, key_mask=np.ones((2, 3), bool))
    with pytest.raises(ShapeError, match="MultiHeadAttention: expected query"):
        net(q, k[:, :3], v)
