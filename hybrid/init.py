"""Initialisers: ``init(shape, dtype) -> jax.Array``, drawn from ``hybrid.random``.

Sampling happens in NumPy (no compilation per shape) from a generator seeded
by the global random stream, so ``hybrid.random.seed(n)`` makes it reproducible.
Fan computations follow MXNet: for a weight of shape ``(out, in, *kernel)``,
``fan_in = in * prod(kernel)`` and ``fan_out = out * prod(kernel)``.
"""
from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import numpy as np

from . import random as _random

__all__ = ["Initializer", "Uniform", "Normal", "Xavier", "MSRAPrelu", "Constant", "Zero", "One",
           "LSTMBias", "create", "register"]

_REGISTRY: dict[str, type] = {}


def register(cls: type) -> type:
    """Register an initializer class under its lower-case name (for string lookup)."""
    _REGISTRY[cls.__name__.lower()] = cls
    return cls


class Initializer:
    """Base class: subclasses implement ``_sample(rng, shape) -> np.ndarray`` (float64), or MXNet 1.x's
    ``_init_weight(name, arr)``, which fills a zero NumPy array ``arr`` in place (``arr[...] = ...``).

    Raises NotImplementedError when a subclass implements neither."""

    def __call__(self, shape: tuple[int, ...], dtype: Any = "float32") -> jnp.ndarray:
        values = self._sample(_random.numpy_rng(), tuple(shape))
        return jnp.asarray(values, dtype=dtype)

    def _sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        init_weight = getattr(self, "_init_weight", None)
        if init_weight is None:
            raise NotImplementedError(f"{type(self).__name__}: an Initializer subclass implements "
                                      "_sample(rng, shape) or MXNet's _init_weight(name, arr)")
        arr = np.zeros(shape)
        init_weight(None, arr)
        return arr

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other: Any) -> bool:
        """Equal when of the same class with the same parameters (MXNet compares the two
        initializers' class and keyword arguments); array parameters compare element-wise."""
        if not isinstance(other, Initializer):
            return NotImplemented
        if type(self) is not type(other) or vars(self).keys() != vars(other).keys():
            return False
        for key, mine in vars(self).items():
            theirs = vars(other)[key]
            if isinstance(mine, (np.ndarray, jnp.ndarray)) or isinstance(theirs, (np.ndarray, jnp.ndarray)):
                a, b = np.asarray(mine), np.asarray(theirs)
                if a.shape != b.shape or not np.array_equal(a, b):
                    return False
            elif mine != theirs:
                return False
        return True

    def __hash__(self) -> int:
        return hash(type(self))


@register
class Uniform(Initializer):
    """U(-scale, scale)."""

    def __init__(self, scale: float = 0.07):
        self.scale = scale

    def _sample(self, rng, shape):
        return rng.uniform(-self.scale, self.scale, shape)


@register
class Normal(Initializer):
    """N(0, sigma**2)."""

    def __init__(self, sigma: float = 0.01):
        self.sigma = sigma

    def _sample(self, rng, shape):
        return rng.normal(0.0, self.sigma, shape)


def _fans(shape: tuple[int, ...]) -> tuple[float, float]:
    if len(shape) < 2:
        raise ValueError(f"Xavier-style initialisation needs a weight of rank >= 2, got shape {shape}")
    receptive = math.prod(shape[2:]) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


@register
class Xavier(Initializer):
    """Glorot initialisation: scale = sqrt(magnitude / factor), factor from fan_in/fan_out."""

    def __init__(self, rnd_type: str = "uniform", factor_type: str = "avg", magnitude: float = 3.0):
        if rnd_type not in ("uniform", "gaussian"):
            raise ValueError(f"Xavier rnd_type must be 'uniform' or 'gaussian', got {rnd_type!r}")
        if factor_type not in ("avg", "in", "out"):
            raise ValueError(f"Xavier factor_type must be 'avg', 'in' or 'out', got {factor_type!r}")
        self.rnd_type, self.factor_type, self.magnitude = rnd_type, factor_type, float(magnitude)

    def _sample(self, rng, shape):
        fan_in, fan_out = _fans(shape)
        factor = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}[self.factor_type]
        scale = math.sqrt(self.magnitude / factor)
        if self.rnd_type == "uniform":
            return rng.uniform(-scale, scale, shape)
        return rng.normal(0.0, scale, shape)


@register
class MSRAPrelu(Xavier):
    """He initialisation for (P)ReLU networks: Gaussian Xavier with magnitude 2/(1+slope**2)."""

    def __init__(self, factor_type: str = "avg", slope: float = 0.25):
        super().__init__("gaussian", factor_type, 2.0 / (1 + slope**2))
        self.slope = slope


@register
class Constant(Initializer):
    """Every element set to ``value`` (a scalar or an array broadcastable to the shape)."""

    def __init__(self, value: Any = 0.0):
        self.value = value

    def _sample(self, rng, shape):
        return np.broadcast_to(np.asarray(self.value, dtype=np.float64), shape)

    def __call__(self, shape, dtype="float32"):
        return jnp.asarray(np.broadcast_to(np.asarray(self.value), tuple(shape)), dtype=dtype)


@register
class Zero(Constant):
    """All zeros."""

    def __init__(self):
        super().__init__(0.0)


@register
class One(Constant):
    """All ones."""

    def __init__(self):
        super().__init__(1.0)


@register
class LSTMBias(Initializer):
    """Bias of an LSTM cell: zeros except the forget gate's quarter, set to ``forget_bias``.

    hybrid's LSTM cells and layers order the gates i, f, g, o (as MXNet), so for a bias of
    shape ``(4 * hidden,)`` elements ``hidden:2 * hidden`` get ``forget_bias``. Use it as
    ``i2h_bias_initializer`` (or ``h2h_bias_initializer``; both are added, as in MXNet).
    Raises ValueError when the first axis is not a multiple of 4.
    """

    def __init__(self, forget_bias: float = 1.0):
        self.forget_bias = forget_bias

    def _sample(self, rng, shape):
        if not shape or shape[0] % 4:
            raise ValueError(f"LSTMBias: the bias needs a first axis of 4 * hidden_size (gates i, f, g, o), "
                             f"got shape {shape}")
        out = np.zeros(shape)
        hidden = shape[0] // 4
        out[hidden:2 * hidden] = self.forget_bias
        return out


_ALIASES = {"zeros": "zero", "ones": "one", "msra": "msraprelu", "gaussian": "normal"}


def create(spec: Any) -> Initializer | None:
    """Turn ``None``, an Initializer or a name (``'zeros'``, ``'xavier'``, ...) into an Initializer."""
    if spec is None or isinstance(spec, Initializer):
        return spec
    if isinstance(spec, str):
        name = _ALIASES.get(spec.lower(), spec.lower())
        if name not in _REGISTRY:
            raise ValueError(f"unknown initializer {spec!r}; known: {sorted(_REGISTRY) + sorted(_ALIASES)}")
        return _REGISTRY[name]()
    if callable(spec):
        return _Callable(spec)
    raise TypeError(f"an initializer must be None, a name, an Initializer or a callable, got {spec!r}")


class _Callable(Initializer):
    """Wraps ``fn(shape, dtype) -> array``."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, shape, dtype="float32"):
        return jnp.asarray(self.fn(tuple(shape), dtype), dtype=dtype)
