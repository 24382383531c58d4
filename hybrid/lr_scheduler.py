"""Learning-rate schedules: ``scheduler(num_update) -> learning rate`` (MXNet's formulas).

Pass one to an optimizer (``Trainer(params, 'sgd', {'lr_scheduler': s})``); the Trainer
counts updates from 1 and feeds the learning rate to its compiled update as a dynamic
input, so a changing rate never recompiles. The optimizer's ``learning_rate`` replaces
the scheduler's ``base_lr``.
"""
from __future__ import annotations

import math
from typing import Sequence

__all__ = ["LRScheduler", "FactorScheduler", "MultiFactorScheduler", "PolyScheduler", "CosineScheduler"]


class LRScheduler:
    """Base class: warm-up for the first ``warmup_steps`` updates, then ``decay``.

    Warm-up: ``warmup_mode='linear'`` rises from ``warmup_begin_lr`` towards ``base_lr`` as
    ``warmup_begin_lr + (base_lr - warmup_begin_lr) * num_update / warmup_steps``;
    ``'constant'`` stays at ``warmup_begin_lr``. Subclasses implement ``decay(num_update)``.
    Schedules are pure functions of ``num_update`` (resuming at any count gives the same value).

    Raises:
        ValueError: negative ``warmup_steps``, unknown ``warmup_mode``, or
            ``warmup_begin_lr > base_lr``.
    """

    def __init__(self, base_lr: float = 0.01, warmup_steps: int = 0, warmup_begin_lr: float = 0.0,
                 warmup_mode: str = "linear"):
        name = type(self).__name__
        if not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError(f"{name}: warmup_steps must be an int >= 0, got {warmup_steps!r}")
        if warmup_mode not in ("linear", "constant"):
            raise ValueError(f"{name}: warmup_mode must be 'linear' or 'constant', got {warmup_mode!r}")
        if warmup_begin_lr > base_lr:
            raise ValueError(f"{name}: warmup_begin_lr ({warmup_begin_lr}) must not exceed base_lr ({base_lr})")
        self.base_lr = base_lr
        self.warmup_steps = warmup_steps
        self.warmup_begin_lr = warmup_begin_lr
        self.warmup_mode = warmup_mode

    def get_warmup_lr(self, num_update: int) -> float:
        """Learning rate during warm-up (``num_update < warmup_steps``)."""
        if self.warmup_mode == "constant":
            return self.warmup_begin_lr
        return self.warmup_begin_lr + (self.base_lr - self.warmup_begin_lr) * num_update / self.warmup_steps

    def decay(self, num_update: int) -> float:
        """Learning rate after warm-up."""
        raise NotImplementedError

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        return self.decay(num_update)


class FactorScheduler(LRScheduler):
    """``base_lr * factor ** k`` with ``k = (num_update - 1) // step`` (0 before ``step + 1``
    updates), never below ``stop_factor_lr`` once it has decayed.

    Raises:
        ValueError: ``step < 1`` or ``factor > 1``.
    """

    def __init__(self, step: int, factor: float = 1.0, stop_factor_lr: float = 1e-8, base_lr: float = 0.01,
                 warmup_steps: int = 0, warmup_begin_lr: float = 0.0, warmup_mode: str = "linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if step < 1:
            raise ValueError(f"FactorScheduler: step must be >= 1, got {step}")
        if factor > 1.0:
            raise ValueError(f"FactorScheduler: factor must be <= 1 to reduce the learning rate, got {factor}")
        self.step, self.factor, self.stop_factor_lr = step, factor, stop_factor_lr

    def decay(self, num_update: int) -> float:
        times = max(0, (num_update - 1) // self.step)
        if times == 0:
            return self.base_lr
        return max(self.base_lr * self.factor ** times, self.stop_factor_lr)


class MultiFactorScheduler(LRScheduler):
    """``base_lr * factor ** k`` where ``k`` counts the entries of ``step`` below ``num_update``.

    Raises:
        ValueError: ``step`` empty, not increasing, or with an entry < 1; ``factor > 1``.
    """

    def __init__(self, step: Sequence[int], factor: float = 1.0, base_lr: float = 0.01, warmup_steps: int = 0,
                 warmup_begin_lr: float = 0.0, warmup_mode: str = "linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        step = list(step)
        if not step or step[0] < 1 or any(b <= a for a, b in zip(step, step[1:])):
            raise ValueError(f"MultiFactorScheduler: step must be a non-empty increasing list of ints >= 1, "
                             f"got {step}")
        if factor > 1.0:
            raise ValueError(f"MultiFactorScheduler: factor must be <= 1 to reduce the learning rate, got {factor}")
        self.step, self.factor = step, factor

    def decay(self, num_update: int) -> float:
        return self.base_lr * self.factor ** sum(num_update > s for s in self.step)


class _DecayToFinal(LRScheduler):
    """Shared set-up of schedules that reach ``final_lr`` at ``max_update`` and stay there."""

    def __init__(self, max_update: int, base_lr: float, final_lr: float, warmup_steps: int,
                 warmup_begin_lr: float, warmup_mode: str):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(max_update, int) or max_update <= warmup_steps:
            raise ValueError(f"{type(self).__name__}: max_update must be an int above warmup_steps "
                             f"({warmup_steps}), got {max_update!r}")
        self.max_update, self.final_lr = max_update, final_lr

    def progress(self, num_update: int) -> float:
        """Fraction of the decay done: 0 at the end of warm-up, 1 from ``max_update`` on."""
        num_update = min(num_update, self.max_update)
        return (num_update - self.warmup_steps) / (self.max_update - self.warmup_steps)


class PolyScheduler(_DecayToFinal):
    """``final_lr + (base_lr - final_lr) * (1 - p) ** pwr`` with
    ``p = (num_update - warmup_steps) / (max_update - warmup_steps)`` capped at 1."""

    def __init__(self, max_update: int, base_lr: float = 0.01, pwr: float = 2, final_lr: float = 0.0,
                 warmup_steps: int = 0, warmup_begin_lr: float = 0.0, warmup_mode: str = "linear"):
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self.power = pwr

    def decay(self, num_update: int) -> float:
        return self.final_lr + (self.base_lr - self.final_lr) * (1.0 - self.progress(num_update)) ** self.power


class CosineScheduler(_DecayToFinal):
    """``final_lr + (base_lr - final_lr) * (1 + cos(pi * p)) / 2`` with ``p`` as in PolyScheduler."""

    def __init__(self, max_update: int, base_lr: float = 0.01, final_lr: float = 0.0, warmup_steps: int = 0,
                 warmup_begin_lr: float = 0.0, warmup_mode: str = "linear"):
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode)

    def decay(self, num_update: int) -> float:
        return self.final_lr + (self.base_lr - self.final_lr) * (1 + math.cos(math.pi * self.progress(num_update))) / 2
