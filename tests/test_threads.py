"""Blocks, parameters and trainers used from several threads (docs/reliability.md, "Threads")."""
import threading

import numpy as np
import pytest

from hybrid import Trainer, autograd, loss, nn


def bn_net(hybridize):
    net = nn.HybridSequential()
    net.add(nn.Dense(16, in_units=8), nn.BatchNorm(in_channels=16), nn.Dense(3, in_units=16))
    net.initialize()
    if hybridize:
        net.hybridize()
    return net


@pytest.mark.parametrize("hybridize", [False, True])
def test_one_block_trained_and_called_from_several_threads(hybridize):
    """Training steps (one at a time, as one trainer's gradients require) run beside forward calls in
    training and predict mode on the same BatchNorm net; nothing fails and the statistics stay finite."""
    net = bn_net(hybridize)
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
    ce = loss.SoftmaxCELoss()
    rng = np.random.default_rng(0)
    x, y = rng.random((32, 8), np.float32), rng.integers(0, 3, 32)
    step_lock, errors = threading.Lock(), []

    def work(mode):
        try:
            for _ in range(25):
                if mode == "train":
                    with step_lock:
                        with autograd.record():
                            l = ce(net(x), y)
                        autograd.backward(l)
                        trainer.step(32)
                elif mode == "forward_train":
                    held = net[1].running_mean.data()
                    before = np.asarray(held).copy()
                    with autograd.train_mode():
                        net(x)
                    np.testing.assert_array_equal(np.asarray(held), before)  # a held array keeps its values
                else:
                    assert np.isfinite(np.asarray(net(x))).all()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(mode,))
               for mode in ("train", "train", "forward_train", "forward_train", "predict")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert np.isfinite(np.asarray(net[1].running_mean.data())).all()
    assert np.isfinite(np.asarray(net[1].running_var.data())).all()


def test_an_eager_training_call_keeps_arrays_held_by_the_user():
    net = bn_net(True)
    held = net[1].running_mean.data()
    before = np.asarray(held).copy()
    with autograd.train_mode():
        net(np.random.default_rng(1).random((4, 8), np.float32))
    np.testing.assert_array_equal(np.asarray(held), before)
    assert not np.allclose(np.asarray(net[1].running_mean.data()), before)
