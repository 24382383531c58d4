"""Initialisers: ``init(shape, dtype) -> jax.Array``, drawn from ``hybrid.random``.

Sampling happens in NumPy (no compilation per shape) from a generator seeded
by the global random stream, so ``hybrid.random.seed(n)`` makes it reproducible.
Fan computations follow MXNet: for a weight of shape ``(out, in, *kernel)``,
``fan_in = in * prod(kernel)`` and ``fan_out = out * prod(kernel)``.

A Parameter asks its initializer with ``for_parameter(name, shape, dtype)``, so an initializer that
depends on the parameter's name (``hybrid.mxnet.init.Mixed``, ``Load``) sees it; the others ignore it.
MXNet's own calling form ``init(desc, arr)`` (a name or ``InitDesc`` and an array to fill) works too.
"""
from __future__ import annotations

import json
import math
from typing import Any

import jax.numpy as jnp
import numpy as np

from . import random as _random

__all__ = ["Initializer", "InitDesc", "Uniform", "Normal", "Xavier", "MSRAPrelu", "Constant", "Zero", "One",
           "LSTMBias", "Orthogonal", "Bilinear", "create", "register", "alias"]

_REGISTRY: dict[str, type] = {}


def register(cls: type) -> type:
    """Register an initializer class under its lower-case name (for string lookup)."""
    _REGISTRY[cls.__name__.lower()] = cls
    return cls


def alias(*names: str):
    """Decorator registering a class under more lower-case names (``@alias('zeros')``)."""
    def wrap(cls: type) -> type:
        for name in names:
            _REGISTRY[name.lower()] = cls
        return cls
    return wrap


class InitDesc(str):
    """A parameter's name (a ``str``) with ``attrs`` (``attrs['__init__']``: the parameter's own
    initializer, a name or JSON string) and ``global_init``, the initializer that was called."""

    attrs: dict
    global_init: Any

    def __new__(cls, name: str, attrs: dict | None = None, global_init: Any = None) -> "InitDesc":
        desc = super().__new__(cls, name)
        desc.attrs = attrs or {}
        desc.global_init = global_init
        return desc


class Initializer:
    """Base class: subclasses implement ``_sample(rng, shape) -> np.ndarray`` (float64), or MXNet 1.x's
    ``_init_weight(name, arr)``, which fills a zero NumPy array ``arr`` in place (``arr[...] = ...``).

    ``init(shape, dtype)`` returns a JAX array of that shape and dtype. MXNet's form ``init(desc, arr)``,
    with ``desc`` a name or :class:`InitDesc` and ``arr`` an array to fill (an ``mx.nd`` array), fills
    ``arr`` as MXNet does: ``desc.attrs['__init__']`` (an initializer's name or JSON) when set, else by
    the name's ending: ``weight`` gets this initializer's values, ``bias``, ``beta`` and ``min`` zeros,
    ``gamma`` and ``max`` ones (a plain string also: ``moving_mean``/``moving_avg``/``moving_inv_var``
    zeros, ``moving_var`` ones, an ``upsampling`` prefix :class:`Bilinear`). Raises ValueError for a
    name of no known ending, NotImplementedError when a subclass implements neither method."""

    def __call__(self, shape: Any, dtype: Any = "float32") -> Any:
        if isinstance(shape, str):
            self._fill(shape, dtype)
            return None
        return self._generate(tuple(shape), dtype)

    def _generate(self, shape: tuple[int, ...], dtype: Any) -> jnp.ndarray:
        return jnp.asarray(self._sample(_random.numpy_rng(), shape), dtype=dtype)

    def for_parameter(self, name: str | None, shape: tuple[int, ...], dtype: Any = "float32") -> jnp.ndarray:
        """The initial value of the parameter called ``name`` (its key in ``collect_params``), a JAX array
        of ``shape`` and ``dtype``. The name reaches MXNet-style ``_init_weight(name, arr)``; other
        initializers ignore it."""
        init_weight = getattr(self, "_init_weight", None)
        if init_weight is None or type(self)._sample is not Initializer._sample:
            return self(tuple(shape), dtype)
        arr = np.zeros(tuple(shape))
        init_weight(name, arr)
        return jnp.asarray(arr, dtype=dtype)

    def _sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        init_weight = getattr(self, "_init_weight", None)
        if init_weight is None:
            raise NotImplementedError(f"{type(self).__name__}: an Initializer subclass implements "
                                      "_sample(rng, shape) or MXNet's _init_weight(name, arr)")
        arr = np.zeros(shape)
        init_weight(None, arr)
        return arr

    def _fill(self, desc: str, arr: Any) -> None:
        """MXNet's ``init(desc, arr)``: write the values chosen by ``desc`` into ``arr``."""
        if isinstance(desc, InitDesc) and desc.global_init is None:
            desc.global_init = self
        own = desc.attrs.get("__init__") if isinstance(desc, InitDesc) else None
        shape, dtype = tuple(arr.shape), _dtype_of(arr)
        chosen = create(own) if own else None
        if chosen is not None:
            arr[:] = chosen.for_parameter(desc, shape, dtype)
            return
        arr[:] = _by_ending(self, desc, shape, dtype)

    def dumps(self) -> str:
        """The initializer as MXNet's JSON: ``'["name", {keyword: value}]'``."""
        return json.dumps([type(self).__name__.lower(), self._kwargs()])

    def _kwargs(self) -> dict:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

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

    def _kwargs(self) -> dict:
        return {"factor_type": self.factor_type, "slope": self.slope}


@register
class Constant(Initializer):
    """Every element set to ``value`` (a scalar or an array broadcastable to the shape)."""

    def __init__(self, value: Any = 0.0):
        self.value = value

    def _sample(self, rng, shape):
        return np.broadcast_to(np.asarray(self.value, dtype=np.float64), shape)

    def _generate(self, shape, dtype):
        return jnp.asarray(np.broadcast_to(np.asarray(self.value), shape), dtype=dtype)

    def _kwargs(self) -> dict:
        value = self.value
        return {"value": value.tolist() if isinstance(value, (np.ndarray, jnp.ndarray)) else value}


@register
@alias("zeros")
class Zero(Constant):
    """All zeros."""

    def __init__(self):
        super().__init__(0.0)

    def _kwargs(self) -> dict:
        return {}


@register
@alias("ones")
class One(Constant):
    """All ones."""

    def __init__(self):
        super().__init__(1.0)

    def _kwargs(self) -> dict:
        return {}


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


@register
class Orthogonal(Initializer):
    """``scale`` times a matrix with orthonormal rows or columns (Saxe et al.), as MXNet: a draw of shape
    ``(shape[0], prod(shape[1:]))`` from U(-1, 1) (``rand_type='uniform'``) or N(0, 1) (``'normal'``)
    is replaced by a factor of its reduced SVD of that shape, so ``W W^T = scale**2 I`` when
    ``shape[0] <= prod(shape[1:])`` and ``W^T W = scale**2 I`` otherwise (``W`` flattened to 2-D).
    Raises ValueError for another ``rand_type`` or a weight of rank < 2."""

    def __init__(self, scale: float = 1.414, rand_type: str = "uniform"):
        if rand_type not in ("uniform", "normal"):
            raise ValueError(f"Orthogonal rand_type must be 'uniform' or 'normal', got {rand_type!r}")
        self.scale, self.rand_type = scale, rand_type

    def _sample(self, rng, shape):
        if len(shape) < 2:
            raise ValueError(f"Orthogonal initialisation needs a weight of rank >= 2, got shape {shape}")
        rows, cols = shape[0], math.prod(shape[1:])
        if self.rand_type == "uniform":
            draw = rng.uniform(-1.0, 1.0, (rows, cols))
        else:
            draw = rng.normal(0.0, 1.0, (rows, cols))
        u, _, vt = np.linalg.svd(draw, full_matrices=False)
        return self.scale * (u if u.shape == draw.shape else vt).reshape(shape)


@register
class Bilinear(Initializer):
    """Bilinear upsampling kernels, the weight of a ``Conv2DTranspose`` that upsamples (MXNet's): for a
    weight ``(..., kh, kw)`` with ``f = ceil(kw / 2)`` and ``c = (2f - 1 - f % 2) / (2f)``, element
    ``[..., y, x] = (1 - |x / f - c|) * (1 - |y / f - c|)``, the same for every channel pair (both
    axes use the last axis's ``f``, as MXNet). Raises ValueError for a weight of rank < 3."""

    def _sample(self, rng, shape):
        if len(shape) < 3:
            raise ValueError(f"Bilinear initialisation needs a weight (..., height, width), got shape {shape}")
        f = math.ceil(shape[-1] / 2.0)
        c = (2 * f - 1 - f % 2) / (2.0 * f)
        y = np.arange(shape[-2])[:, None]
        x = np.arange(shape[-1])[None, :]
        kernel = (1 - np.abs(x / f - c)) * (1 - np.abs(y / f - c))
        return np.broadcast_to(kernel, shape)


_ALIASES = {"msra": "msraprelu", "gaussian": "normal"}


def create(spec: Any, *args: Any, **kwargs: Any) -> Initializer | None:
    """Turn ``None``, an Initializer, a callable ``fn(shape, dtype)`` or a name (``'zeros'``, ``'xavier'``,
    with the class's arguments after it: ``create('constant', value=2)``) into an Initializer. As MXNet,
    a name may be the JSON of ``dumps()`` (``'["xavier", {"magnitude": 2}]'``), and a dict (or its JSON)
    holds the name under ``'initializer'`` and the class's keywords. Raises ValueError for an unknown name,
    TypeError for anything else."""
    if spec is None or isinstance(spec, Initializer):
        if args or kwargs:
            raise TypeError(f"create: {spec!r} is already an initializer; arguments {args or ''}{kwargs or ''} "
                            "are for a name")
        return spec
    if isinstance(spec, dict):
        keywords = dict(spec)
        return create(keywords.pop("initializer"), **keywords)
    if isinstance(spec, str):
        text = spec.strip()
        if text.startswith("["):
            name, keywords = json.loads(text)
            return create(name, **keywords)
        if text.startswith("{"):
            return create(json.loads(text))
        name = _ALIASES.get(spec.lower(), spec.lower())
        if name not in _REGISTRY:
            raise ValueError(f"unknown initializer {spec!r}; known: {sorted(set(_REGISTRY) | set(_ALIASES))}")
        return _REGISTRY[name](*args, **kwargs)
    if callable(spec):
        return _Callable(spec)
    raise TypeError(f"an initializer must be None, a name, an Initializer or a callable, got {spec!r}")


def _dtype_of(arr: Any) -> Any:
    dtype = getattr(arr, "dtype", None)
    return "float32" if dtype is None else dtype


def _by_ending(init: Initializer, name: str, shape: tuple[int, ...], dtype: Any) -> Any:
    """MXNet's choice of values for a parameter named ``name`` that has no initializer of its own."""
    plain = not isinstance(name, InitDesc)
    if name.endswith("weight"):
        return init.for_parameter(name, shape, dtype)
    if plain and name.startswith("upsampling"):
        return Bilinear()(shape, dtype)
    if name.endswith(("bias", "beta", "min")) or (plain and name.endswith(("moving_mean", "moving_inv_var",
                                                                           "moving_avg"))):
        return jnp.zeros(shape, dtype)
    if name.endswith(("gamma", "max")) or (plain and name.endswith("moving_var")):
        return jnp.ones(shape, dtype)
    raise ValueError(f"Unknown initialization pattern for {name}: an initializer called with a name fills a "
                     "name ending in 'weight', 'bias', 'gamma' (1.0), 'beta' (0.0), 'min' or 'max'; give the "
                     "parameter its own initializer (InitDesc(name, attrs={'__init__': ...}) or init=)")


class _Callable(Initializer):
    """Wraps ``fn(shape, dtype) -> array``."""

    def __init__(self, fn):
        self.fn = fn

    def _generate(self, shape, dtype):
        return jnp.asarray(self.fn(shape, dtype), dtype=dtype)
