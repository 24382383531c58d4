"""Learning-rate schedulers: exact values, MXNet's stateful loop, and use inside Trainer steps."""
import math

import numpy as np
import pytest

from hybrid import HybridBlock, Parameter, Trainer, autograd, init
from hybrid.lr_scheduler import CosineScheduler, FactorScheduler, LRScheduler, MultiFactorScheduler, PolyScheduler


def test_factor_scheduler_values():
    s = FactorScheduler(step=3, factor=0.5, stop_factor_lr=0.1, base_lr=1.0)
    got = [s(n) for n in (0, 1, 3, 4, 6, 7, 10, 13, 100)]
    assert got == pytest.approx([1.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.125, 0.1, 0.1])


def test_factor_scheduler_matches_mxnet_stateful_loop():
    """MXNet decays ``base_lr`` in a while loop each time ``num_update`` passes ``count + step``."""
    lr, count, expected = 0.8, 0, []
    for n in range(1, 40):
        while n > count + 4:
            count += 4
            lr = max(lr * 0.7, 0.05)
        expected.append(lr)
    s = FactorScheduler(step=4, factor=0.7, stop_factor_lr=0.05, base_lr=0.8)
    assert [s(n) for n in range(1, 40)] == pytest.approx(expected)
    assert s(9) == pytest.approx(expected[8])  # pure function of num_update: going back is fine


def test_warmup_linear_and_constant():
    linear = FactorScheduler(step=2, factor=0.5, base_lr=1.0, warmup_steps=4, warmup_begin_lr=0.2)
    assert [linear(n) for n in (0, 1, 3, 4, 5)] == pytest.approx([0.2, 0.4, 0.8, 0.5, 0.25])
    constant = MultiFactorScheduler([6], factor=0.1, base_lr=1.0, warmup_steps=4, warmup_begin_lr=0.2,
                                    warmup_mode="constant")
    assert [constant(n) for n in (0, 3, 4, 6, 7)] == pytest.approx([0.2, 0.2, 1.0, 1.0, 0.1])


def test_multi_factor_scheduler_values():
    s = MultiFactorScheduler(step=[2, 5], factor=0.1, base_lr=1.0)
    assert [s(n) for n in (1, 2, 3, 5, 6, 50)] == pytest.approx([1.0, 1.0, 0.1, 0.1, 0.01, 0.01])


def test_poly_scheduler_values():
    s = PolyScheduler(max_update=10, base_lr=1.0, pwr=2, final_lr=0.1, warmup_steps=2)
    # warm-up 0 -> 1 over 2 steps, then 0.1 + 0.9 * (1 - (n - 2) / 8) ** 2
    assert [s(n) for n in (1, 2, 6, 10, 20)] == pytest.approx([0.5, 1.0, 0.1 + 0.9 * 0.25, 0.1, 0.1])


def test_cosine_scheduler_values():
    s = CosineScheduler(max_update=10, base_lr=2.0)
    assert [s(n) for n in (0, 5, 10, 15)] == pytest.approx([2.0, 1.0, 0.0, 0.0], abs=1e-12)
    warm = CosineScheduler(max_update=10, base_lr=2.0, final_lr=0.5, warmup_steps=2, warmup_begin_lr=0.5)
    assert warm(1) == pytest.approx(1.25)
    assert warm(4) == pytest.approx(0.5 + 1.5 * (1 + math.cos(math.pi / 4)) / 2)


def test_custom_scheduler_subclass():
    class Halving(LRScheduler):
        def decay(self, num_update):
            return self.base_lr / 2 ** num_update

    s = Halving(base_lr=1.0, warmup_steps=1, warmup_begin_lr=0.5)
    assert [s(0), s(1), s(3)] == [0.5, 0.5, 0.125]


def test_errors():
    with pytest.raises(ValueError, match="FactorScheduler: step must be >= 1"):
        FactorScheduler(step=0)
    with pytest.raises(ValueError, match="factor must be <= 1"):
        FactorScheduler(step=2, factor=1.5)
    with pytest.raises(ValueError, match="increasing"):
        MultiFactorScheduler([3, 3])
    with pytest.raises(ValueError, match="warmup_mode"):
        CosineScheduler(10, warmup_mode="cosine")
    with pytest.raises(ValueError, match="max_update must be an int above warmup_steps"):
        PolyScheduler(max_update=5, warmup_steps=5)
    with pytest.raises(ValueError, match="warmup_begin_lr"):
        CosineScheduler(10, base_lr=0.1, warmup_begin_lr=0.5)


class Scaled(HybridBlock):
    """out = w * x, so the gradient of sum(out) is x whatever w is."""

    def __init__(self):
        super().__init__()
        self.w = Parameter("w", shape=(2,), init=init.Constant(np.array([1.0, -2.0])))

    def forward(self, x):
        return self.w.data() * x


@pytest.mark.parametrize("scheduler, expected", [
    (FactorScheduler(step=2, factor=0.5), [1.0, 1.0, 0.5, 0.5, 0.25]),
    (CosineScheduler(max_update=4, base_lr=9.0), [(1 + math.cos(math.pi * min(n, 4) / 4)) / 2 for n in range(1, 6)]),
])
def test_trainer_steps_use_the_schedule_without_recompiling(scheduler, expected):
    """The optimizer's learning_rate (1.0) replaces base_lr; updates are counted from 1."""
    block = Scaled()
    block.initialize()
    trainer = Trainer(block.collect_params(), "sgd", {"learning_rate": 1.0, "lr_scheduler": scheduler})
    x = np.array([0.5, 2.0], np.float32)
    rates = []
    for _ in range(5):
        before = np.asarray(block.w.data(), np.float64)
        with autograd.record():
            out = block(x)
        autograd.backward(out)
        trainer.step(1)
        rates.append(((before - np.asarray(block.w.data())) / x).mean())  # w -= lr * x
    assert rates == pytest.approx(expected, abs=1e-6)
    assert trainer.learning_rate == pytest.approx(expected[-1], abs=1e-6)
    assert len(trainer._update_programs) == 1
