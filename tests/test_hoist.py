"""Hoisting of parameter-only work out of inference graphs (hybrid.graph.hoist)."""
import jax
import jax.numpy as jnp
import numpy as np

import hybrid
from hybrid import nn
from hybrid.graph import hoist, trace
from hybrid.graph import lower


def conv_bn_net():
    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, 3, padding=1), nn.BatchNorm(running_mean_initializer=hybrid.init.Normal(1.0)),
            nn.Activation("relu"), nn.Conv2D(4, 3), nn.GlobalAvgPool2D(), nn.Dense(3))
    net.initialize()
    return net


def numpy_reference(net, x):
    """The same network in float64 NumPy, from the parameters' current values."""
    p = {name: np.asarray(v.data(), np.float64) for name, v in net.collect_params().items()}

    def conv(h, w, b, pad):
        h = np.pad(h, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        k = w.shape[-1]
        out = np.zeros((h.shape[0], w.shape[0], h.shape[2] - k + 1, h.shape[3] - k + 1))
        for i in range(k):
            for j in range(k):
                out += np.einsum("nchw,oc->nohw", h[:, :, i:i + out.shape[2], j:j + out.shape[3]], w[:, :, i, j])
        return out + b[None, :, None, None]

    h = conv(np.asarray(x, np.float64), p["0.weight"], p["0.bias"], 1)
    scale = p["1.gamma"] / np.sqrt(p["1.running_var"] + 1e-5)
    h = (h - p["1.running_mean"][None, :, None, None]) * scale[None, :, None, None] + p["1.beta"][None, :, None, None]
    h = conv(np.maximum(h, 0), p["3.weight"], p["3.bias"], 0).mean(axis=(2, 3))
    return h @ p["5.weight"].T + p["5.bias"]


def test_split_moves_only_parameter_work():
    def fn(w, b, x):
        wt = jnp.transpose(w)            # parameters only: hoisted
        bias = jnp.broadcast_to(b, (4, 3))  # parameters only, but larger than what it reads: kept
        return x @ wt + bias

    args = [np.arange(6, dtype=np.float32).reshape(3, 2), np.ones(3, np.float32), np.ones((4, 2), np.float32)]
    g = trace(fn, *args)
    split = hoist.split_parameter_work(g, 2)
    assert [n.op for n in split.prepare.nodes] == ["transpose"]
    assert "transpose" not in [n.op for n in split.main.nodes]
    split.prepare.verify()
    split.main.verify()
    prepared = lower(split.prepare)(*args[:2])
    np.testing.assert_allclose(lower(split.main)(*args[:2], *prepared, args[2])[0], lower(g)(*args)[0])
    assert hoist.split_parameter_work(trace(lambda w, x: x * 2.0 + w, np.ones(2, np.float32), args[2]), 1) is None


def test_hybridized_inference_matches_numpy_and_follows_parameter_updates(rng):
    net = conv_bn_net()
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    net(x)
    net.hybridize()
    np.testing.assert_allclose(net(x), numpy_reference(net, x), rtol=1e-4, atol=1e-4)
    entry = next(iter(net._cached_op.entries.values()))
    assert hasattr(entry.infer, "prepare")  # the folded BatchNorm and the HWIO weights were hoisted
    for name in ("0.weight", "1.running_mean", "3.weight"):  # each feeds hoisted work: results must follow
        param = net.collect_params()[name]
        param.set_data(np.asarray(param.data()) * 1.5 + 0.1)
        np.testing.assert_allclose(net(x), numpy_reference(net, x), rtol=1e-4, atol=1e-4)


def test_training_updates_reach_hoisted_inference(rng):
    net = conv_bn_net()
    x = rng.standard_normal((4, 3, 6, 6)).astype(np.float32)
    y = rng.integers(0, 3, 4).astype(np.int32)
    net(x)
    net.hybridize()
    trainer = hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    loss_fn = hybrid.loss.SoftmaxCrossEntropyLoss()
    before = np.asarray(net(x))
    for _ in range(2):
        with hybrid.autograd.record():
            loss = loss_fn(net(x), y)
        hybrid.autograd.backward(loss)
        trainer.step(4)
        after = np.asarray(net(x))
        np.testing.assert_allclose(after, numpy_reference(net, x), rtol=1e-4, atol=1e-4)
    assert not np.allclose(before, after)
    jax.block_until_ready(after)


def test_inference_between_training_steps_keeps_the_step_program():
    """The hoisted inference cache does not hold the parameter arrays, so the next training step
    still reuses their buffers and runs the program it compiled before (no new compile)."""
    from hybrid import Trainer, autograd, loss
    from hybrid._core import lazy as _lazy
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3, in_channels=2), nn.BatchNorm(in_channels=4), nn.Activation("relu"), nn.Flatten(),
            nn.Dense(3))
    net.initialize()
    net.hybridize()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    x, y = np.ones((4, 2, 6, 6), np.float32), np.arange(4) % 3
    loss_fn = loss.SoftmaxCELoss()

    def step():
        with autograd.record():
            l = loss_fn(net(x), y)
        autograd.backward(l)
        trainer.step(4)
    step()
    step()
    net(x)  # predict mode: BatchNorm folded into the convolution, prepared once and cached
    compiles = _lazy.Stats.compiles
    step()
    assert _lazy.Stats.compiles == compiles


def _count_prepares(hoisted, monkeypatch):
    calls = []
    prepare = hoisted.prepare
    monkeypatch.setattr(hoisted, "prepare", lambda values: (calls.append(1), prepare(values))[1])
    return calls


def test_compiled_inference_reads_the_hoisted_work_once_per_parameter_change(rng, monkeypatch):
    """hybrid.compile of a predict step takes the prepared (folded, relaid) weights from the hoisted program's
    cache instead of redoing that work at every call, and follows every change of the parameters."""
    net = conv_bn_net()
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    net(x)
    net.hybridize()
    predict = hybrid.compile(lambda x: net(x))
    np.testing.assert_allclose(predict(x), numpy_reference(net, x), rtol=1e-4, atol=1e-4)
    hoisted = next(iter(net._cached_op.entries.values())).infer
    calls = _count_prepares(hoisted, monkeypatch)
    for _ in range(3):
        np.testing.assert_allclose(predict(x), numpy_reference(net, x), rtol=1e-4, atol=1e-4)
    assert calls == []  # the parameters did not change: nothing prepared again
    for name in ("0.weight", "1.running_var", "3.weight"):
        param = net.collect_params()[name]
        param.set_data(np.asarray(param.data()) * 1.5 + 0.1)
        np.testing.assert_allclose(predict(x), numpy_reference(net, x), rtol=1e-4, atol=1e-4)
    assert len(calls) == 3 and predict.num_programs == 1


def test_compiled_step_calling_the_net_after_updating_it_uses_the_new_weights(rng):
    """Inside a step that changes the parameters before an inference call, that call cannot use weights
    prepared before the step: it computes from the new values."""
    net = conv_bn_net()
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    net(x)
    net.hybridize()
    weight = net.collect_params()["0.weight"]

    def halve_then_predict(x):
        weight.set_data(weight.data() * 0.5)
        return net(x)
    step = hybrid.compile(halve_then_predict)
    for _ in range(2):
        out = step(x)
        np.testing.assert_allclose(out, numpy_reference(net, x), rtol=1e-4, atol=1e-4)
