"""Optimizer states staged as a group: the recorded step takes the previous step's states as a few packed
buffers (donated to the new ones) instead of one input and one output per array, and the states stay
right when they are read, held or replaced between steps."""
import jax
import numpy as np
import pytest

import hybrid
from hybrid import Trainer, _lazy, autograd, init, loss, nn
from hybrid.errors import AutogradError

LR, MOMENTUM = 0.1, 0.9


def _setup(optimizer="sgd", params=None):
    net = nn.HybridSequential()
    net.add(nn.Dense(6, activation="tanh", in_units=4), nn.Dense(3, in_units=6))
    net.initialize(init.Xavier())
    net.hybridize()
    trainer = Trainer(net.collect_params(), optimizer, params or {"learning_rate": LR, "momentum": MOMENTUM})
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    y = np.arange(5) % 3
    return net, trainer, x, y


def _step(net, trainer, x, y):
    with autograd.record():
        l = loss.SoftmaxCELoss()(net(x), y).mean()
    autograd.backward(l)
    trainer.step(1)
    return float(l)


def _numpy_reference(weights, x, y, steps):
    """SGD with momentum on the same two-layer network, by hand (NumPy, gradients of the mean softmax
    cross-entropy written out). The states returned are MXNet's: ``-lr`` times the momentum."""
    w1, b1, w2, b2 = [np.asarray(w, np.float64) for w in weights]
    moms = [np.zeros_like(w) for w in (w1, b1, w2, b2)]
    losses = []
    for _ in range(steps):
        h = np.tanh(x @ w1.T + b1)
        z = h @ w2.T + b2
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        losses.append(-np.log(p[np.arange(len(y)), y]).mean())
        dz = (p - np.eye(3)[y]) / len(y)
        gw2, gb2 = dz.T @ h, dz.sum(0)
        dh = dz @ w2 * (1 - h ** 2)
        gw1, gb1 = dh.T @ x, dh.sum(0)
        params = [w1, b1, w2, b2]
        for i, g in enumerate((gw1, gb1, gw2, gb2)):
            moms[i] = MOMENTUM * moms[i] + g
            params[i] = params[i] - LR * moms[i]
        w1, b1, w2, b2 = params
    return losses, [w1, b1, w2, b2], [-LR * m for m in moms]


def _weights(net):
    return [np.asarray(net[0].weight.data()), np.asarray(net[0].bias.data()),
            np.asarray(net[1].weight.data()), np.asarray(net[1].bias.data())]


def _states(net, trainer):
    params = [net[0].weight, net[0].bias, net[1].weight, net[1].bias]
    return [trainer._states[p] for p in params]


def test_states_are_one_group_and_training_matches_numpy():
    net, trainer, x, y = _setup()
    start = _weights(net)
    losses = [_step(net, trainer, x, y) for _ in range(4)]
    packs = {_lazy.pack_of(state[0]) for state in _states(net, trainer)}
    assert len(packs) == 1 and None not in packs  # every momentum is a member of one packed group
    expected_losses, expected_weights, expected_moms = _numpy_reference(start, x, y, 4)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-5)
    for got, want in zip(_weights(net), expected_weights):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    for (got,), want in zip(_states(net, trainer), expected_moms):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-6)


def test_the_step_takes_the_group_as_buffers_and_reuses_them():
    net, trainer, x, y = _setup()
    for _ in range(2):
        _step(net, trainer, x, y)
    before = _lazy.pack_of(_states(net, trainer)[0][0])
    pointers = [b.unsafe_buffer_pointer() for b in before.buffers]
    _step(net, trainer, x, y)
    after = _lazy.pack_of(_states(net, trainer)[0][0])
    assert after is not before
    assert [b.unsafe_buffer_pointer() for b in after.buffers] == pointers  # donated to the new states
    with pytest.raises(AutogradError, match="replaced by a later step"):
        before.value(0)
    # 4 weights, the momenta's one float32 buffer, x, y, learning rate and rescale: not 4 + 4 + 4
    program = next(reversed(_lazy._PROGRAMS))
    assert len(program.donate) == 5


def test_a_read_state_is_right_and_training_goes_on():
    net, trainer, x, y = _setup()
    start = _weights(net)
    _step(net, trainer, x, y)
    _step(net, trainer, x, y)
    read = [np.asarray(state[0]) for state in _states(net, trainer)]  # splits the group
    losses = [_step(net, trainer, x, y) for _ in range(2)]
    expected_losses, expected_weights, expected_moms = _numpy_reference(start, x, y, 4)
    for got, want in zip(read, _numpy_reference(start, x, y, 2)[2]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(losses, expected_losses[2:], rtol=1e-5)
    for got, want in zip(_weights(net), expected_weights):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_a_held_state_keeps_its_value_across_later_steps():
    net, trainer, x, y = _setup()
    start = _weights(net)
    _step(net, trainer, x, y)
    held = _states(net, trainer)[0][0]  # held, not read: its group's buffers must not be reused
    for _ in range(2):
        _step(net, trainer, x, y)
    np.testing.assert_allclose(np.asarray(held), _numpy_reference(start, x, y, 1)[2][0], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(_states(net, trainer)[0][0]), _numpy_reference(start, x, y, 3)[2][0],
                               rtol=1e-4, atol=1e-6)


def test_saved_and_loaded_states_continue_the_same(tmp_path):
    net, trainer, x, y = _setup("adam", {"learning_rate": 0.01})
    for _ in range(2):
        _step(net, trainer, x, y)
    net.save_parameters(str(tmp_path / "net.params"))
    trainer.save_states(str(tmp_path / "trainer.states"))
    continued = [_step(net, trainer, x, y) for _ in range(2)]

    net2, trainer2, _, _ = _setup("adam", {"learning_rate": 0.01})
    net2.load_parameters(str(tmp_path / "net.params"))
    _step(net2, trainer2, x, y)  # creates the states, which load_states then replaces
    net2.load_parameters(str(tmp_path / "net.params"))
    trainer2.load_states(str(tmp_path / "trainer.states"))
    np.testing.assert_allclose([_step(net2, trainer2, x, y) for _ in range(2)], continued, rtol=1e-6)


def test_one_state_per_parameter_is_not_grouped():
    net = nn.Dense(3, in_units=4)
    net.initialize()
    net.hybridize()
    trainer = Trainer([net.weight], "sgd", {"learning_rate": LR, "momentum": MOMENTUM})
    x = np.ones((2, 4), np.float32)
    for _ in range(2):
        with autograd.record():
            l = net(x).sum()
        autograd.backward(l)
        trainer.step(1)
    assert _lazy.pack_of(trainer._states[net.weight][0]) is None
    assert isinstance(trainer._states[net.weight][0], jax.Array)


def test_large_states_pass_as_they_are_and_the_second_step_compiles_nothing():
    """A momentum of at least PACK_BELOW_BYTES is one of the group's buffers as it is; the first step's
    program (states packed on the host) is the one every later step calls, and it reuses every buffer."""
    net = nn.HybridSequential()
    net.add(nn.Dense(160, activation="tanh", in_units=120), nn.Dense(3, in_units=160))
    net.initialize(init.Xavier())
    net.hybridize()
    assert 160 * 120 * 4 >= _lazy.PACK_BELOW_BYTES
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": LR, "momentum": MOMENTUM})
    x, y = np.ones((4, 120), np.float32), np.arange(4) % 3
    compiles = []

    def listen(event, *_args, **_kwargs):
        if event.endswith("backend_compile_duration"):
            compiles.append(event)

    _step(net, trainer, x, y)
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        for _ in range(2):
            _step(net, trainer, x, y)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert compiles == []
    big = _lazy.pack_of(trainer._states[net[0].weight][0])
    assert big is not None and len(big.buffers) == 2  # the small momenta's flat buffer, the large one
    # 4 weights and the 2 buffers of the momenta
    assert len(next(reversed(_lazy._PROGRAMS)).donate) == 6
