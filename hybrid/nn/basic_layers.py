"""Containers and basic layers: Sequential, Dense, Dropout, BatchNorm, LayerNorm, Embedding, ..."""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._core import compat as _compat
from .. import autograd
from .. import random as _random
from ..block import Block, HybridBlock
from ..errors import ShapeError
from ..graph import layer_ops
from ..parameter import Parameter
from .activations import Activation

__all__ = ["Sequential", "HybridSequential", "Dense", "Dropout", "BatchNorm", "LayerNorm", "Embedding",
           "Flatten", "Lambda", "HybridLambda", "Identity", "Concatenate", "HybridConcatenate"]


def check_positive_int(layer: str, name: str, value: Any) -> int:
    """``value`` as an int, or ValueError naming the layer and argument."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{layer}: {name} must be a positive integer, got {value!r}")
    return int(value)


def check_non_negative_int(layer: str, name: str, value: Any) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{layer}: {name} must be a non-negative integer (0 = infer), got {value!r}")
    return int(value)


def check_rate(layer: str, name: str, value: Any) -> float:
    """A dropout rate in [0, 1) as a float, or ValueError naming the layer and argument."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not 0 <= value < 1:
        raise ValueError(f"{layer}: {name} must be in [0, 1), got {value!r}")
    return float(value)


def as_float(x: Any, dtype: Any) -> jax.Array:
    """``x`` converted to ``dtype`` when it differs (e.g. integer inputs to a float layer). Raises TypeError
    for a complex ``x`` going to a real layer (the imaginary part would be dropped silently)."""
    if x.dtype == dtype:
        return x
    if jnp.issubdtype(x.dtype, jnp.complexfloating) and not jnp.issubdtype(dtype, jnp.complexfloating):
        raise TypeError(f"got a {x.dtype} input for {np.dtype(dtype).name} parameters; converting it would drop "
                        "the imaginary part. Pass real inputs (e.g. jnp.real(x) or the real and imaginary parts "
                        "as features).")
    return x.astype(dtype)


class _SequentialMixin:
    """Shared behaviour of Sequential and HybridSequential."""

    def add(self, *blocks: Block) -> None:
        """Append blocks; they are named ``'0'``, ``'1'``, ... in ``collect_params``."""
        for block in blocks:
            self.register_child(block)

    def forward(self, x: Any, *args: Any) -> Any:
        for block in self._children.values():
            x = block(x, *args)
            args = ()
            if isinstance(x, (tuple, list)):
                args, x = tuple(x[1:]), x[0]
        return (x,) + tuple(args) if args else x

    def __getitem__(self, key: int | slice) -> Any:
        children = list(self._children.values())
        if isinstance(key, slice):
            net = type(self)()
            net.add(*children[key])
            return net
        return children[key]

    def __len__(self) -> int:
        return len(self._children)

    def __iter__(self):
        return iter(self._children.values())


class Sequential(_SequentialMixin, Block):
    """Runs children in order; each child's output is the next one's input."""

    def hybridize(self, active: bool = True, **kwargs: Any) -> None:
        """Hybridize the children; warns when all of them are HybridBlocks (HybridSequential compiles the
        whole stack as one program)."""
        if active and self._children and all(isinstance(c, HybridBlock) for c in self._children.values()):
            warnings.warn("all children of this Sequential are HybridBlocks: use nn.HybridSequential to compile "
                          "them as one program", stacklevel=2)
        super().hybridize(active, **kwargs)


class HybridSequential(_SequentialMixin, HybridBlock):
    """Sequential whose children are HybridBlocks, so the whole stack can be hybridized."""


class Dense(HybridBlock):
    """Fully connected layer: ``activation(x @ weight.T + bias)``.

    Args:
        units: output size. weight has shape ``(units, in_units)`` (Gluon's layout). 0 is accepted at
            construction, as MXNet does, but such a layer cannot be initialised (a 0 in a shape means unknown).
        flatten: reshape inputs of rank > 2 to ``(batch, -1)``; otherwise apply to the last axis.
        in_units: input size, 0 to infer it at the first call.
    Input: ``(batch, in_units)`` (or ``(batch, ...)`` with ``flatten``, or ``(..., in_units)``).
    Output: ``(batch, units)`` / ``(..., units)``. Raises ShapeError when the input size does not match.
    """

    def __init__(self, units: int, activation: str | None = None, use_bias: bool = True, flatten: bool = True,
                 dtype: Any = "float32", weight_initializer: Any = None, bias_initializer: Any = "zeros",
                 in_units: int = 0):
        super().__init__()
        if not isinstance(units, (int, np.integer)) or isinstance(units, bool) or units < 0:
            raise ValueError(f"Dense: units must be a non-negative integer, got {units!r}")
        self._units = int(units)
        check_non_negative_int("Dense", "in_units", in_units)
        self._flatten = flatten
        self.weight = Parameter("weight", shape=(units, in_units), dtype=dtype, init=weight_initializer,
                                allow_deferred_init=True)
        self.bias = Parameter("bias", shape=(units,), dtype=dtype, init=bias_initializer,
                              allow_deferred_init=True) if use_bias else None
        self.act = Activation(activation) if activation is not None else None

    def _in_features(self, x) -> int:
        if self._flatten:
            if x.ndim < 2:
                raise ShapeError(f"Dense with flatten=True expects an input of shape (batch, ...), got {x.shape}")
            return math.prod(x.shape[1:])
        return x.shape[-1]

    def infer_shape(self, x, *args) -> None:
        self.weight.shape = (self._units, self._in_features(x))

    def forward(self, x):
        features = self._in_features(x)
        expected = self.weight.shape[1]
        if expected and features != expected:
            where = "flattened over all but the batch axis" if self._flatten else "on the last axis"
            raise ShapeError(f"expected inputs with {expected} features ({where}), got shape {x.shape}")
        weight = self.weight.data()
        y = layer_ops.dense(as_float(x, weight.dtype), weight,
                            self.bias.data() if self.bias is not None else None, flatten=self._flatten)
        return self.act(y) if self.act is not None else y

    def __repr__(self) -> str:
        in_units = self.weight.shape[1] if self.weight.shape[1] else None
        act = repr(self.act) if self.act is not None else "linear"
        return f"Dense({in_units} -> {self._units}, {act})"


class Dropout(HybridBlock):
    """Zero each element with probability ``rate`` in training mode; identity in predict mode.

    ``axes`` lists axes sharing one mask value (e.g. ``(2, 3)`` for channel dropout on NCHW).
    A fresh mask is drawn on every call, hybridized or not.
    """

    def __init__(self, rate: float, axes: tuple[int, ...] = ()):
        super().__init__()
        if not 0.0 <= float(rate) < 1.0:
            raise ValueError(f"Dropout: rate must be in [0, 1), got {rate!r}")
        self._rate = float(rate)
        self._axes = tuple(axes)

    def forward(self, x):
        if not autograd.is_training() or self._rate == 0.0:
            return x
        return layer_ops.dropout(x, _random.next_key(), rate=self._rate, axes=self._axes)

    def __repr__(self) -> str:
        return f"Dropout(p = {self._rate}, axes={self._axes})"


def _norm_axis(layer: str, axis: int, x) -> int:
    if not -x.ndim <= axis < x.ndim:
        raise ShapeError(f"{layer} normalises axis {axis}, but the input has shape {x.shape}")
    return axis % x.ndim


class BatchNorm(HybridBlock):
    """Batch normalisation with running statistics (Gluon semantics).

    Training mode normalises with the batch statistics over all axes but ``axis``
    and updates ``running = momentum * running + (1 - momentum) * batch`` (also
    when hybridized); predict mode (or ``use_global_stats``) uses the running
    statistics. Parameters: ``gamma``, ``beta``, ``running_mean``, ``running_var``
    of shape ``(in_channels,)``.
    """

    def __init__(self, axis: int = 1, momentum: float = 0.9, epsilon: float = 1e-5, center: bool = True,
                 scale: bool = True, use_global_stats: bool = False, beta_initializer: Any = "zeros",
                 gamma_initializer: Any = "ones", running_mean_initializer: Any = "zeros",
                 running_variance_initializer: Any = "ones", in_channels: int = 0, dtype: Any = "float32"):
        super().__init__()
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"BatchNorm: momentum must be in [0, 1], got {momentum!r}")
        if epsilon <= 0:
            raise ValueError(f"BatchNorm: epsilon must be positive, got {epsilon!r}")
        in_channels = check_non_negative_int("BatchNorm", "in_channels", in_channels)
        self._axis, self._momentum, self._epsilon = axis, float(momentum), float(epsilon)
        self._use_global_stats, self._scale = use_global_stats, scale
        shape = (in_channels,)
        self.gamma = Parameter("gamma", grad_req="write" if scale else "null", shape=shape,
                               init=gamma_initializer, allow_deferred_init=True, differentiable=scale, dtype=dtype)
        self.beta = Parameter("beta", grad_req="write" if center else "null", shape=shape,
                              init=beta_initializer, allow_deferred_init=True, differentiable=center, dtype=dtype)
        self.running_mean = Parameter("running_mean", grad_req="null", shape=shape, init=running_mean_initializer,
                                      allow_deferred_init=True, differentiable=False, dtype=dtype)
        self.running_var = Parameter("running_var", grad_req="null", shape=shape,
                                     init=running_variance_initializer, allow_deferred_init=True,
                                     differentiable=False, dtype=dtype)

    @property
    def _kwargs(self) -> dict:
        """Gluon 1.x's attributes of the ``BatchNorm`` operator, for subclasses whose ``hybrid_forward``
        calls ``F.BatchNorm(x, gamma, beta, running_mean, running_var, **self._kwargs)``."""
        return {"axis": self._axis, "eps": self._epsilon, "momentum": self._momentum, "fix_gamma": not self._scale,
                "use_global_stats": self._use_global_stats}

    def infer_shape(self, x, *args) -> None:
        channels = x.shape[_norm_axis("BatchNorm", self._axis, x)]
        for param in (self.gamma, self.beta, self.running_mean, self.running_var):
            param.shape = (channels,)

    def forward(self, x):
        axis = _norm_axis("BatchNorm", self._axis, x)
        expected = self.gamma.shape[0]
        if expected and x.shape[axis] != expected:
            raise ShapeError(f"expected {expected} channels on axis {self._axis}, got input of shape {x.shape}")
        params = (self.gamma.data(), self.beta.data(), self.running_mean.data(), self.running_var.data())
        training = autograd.is_training() and not self._use_global_stats
        if training and math.prod(x.shape) // x.shape[axis] == 0:
            raise ShapeError(f"got an empty batch (input shape {x.shape}) in training mode: its statistics are "
                             "undefined and would make the running mean and variance NaN. Skip empty batches.")
        out = layer_ops.batch_norm(x, *params, axis=axis, eps=self._epsilon, momentum=self._momentum,
                                   training=training)
        if not training:
            return out
        y, mean, var = out
        self.running_mean.set_data(mean)
        self.running_var.set_data(var)
        return y

    def cast(self, dtype: Any) -> "BatchNorm":
        if np.dtype(jnp.dtype(dtype)).name in ("float16", "bfloat16"):
            dtype = "float32"  # statistics stay in float32, as in Gluon
        return super().cast(dtype)

    def __repr__(self) -> str:
        channels = self.gamma.shape[0] or None
        return (f"BatchNorm(axis={self._axis}, eps={self._epsilon}, momentum={self._momentum}, "
                f"in_channels={channels})")


class LayerNorm(HybridBlock):
    """Layer normalisation over ``axis`` with ``gamma``/``beta`` of shape ``(in_channels,)``."""

    def __init__(self, axis: int = -1, epsilon: float = 1e-5, center: bool = True, scale: bool = True,
                 beta_initializer: Any = "zeros", gamma_initializer: Any = "ones", in_channels: int = 0,
                 dtype: Any = "float32"):
        super().__init__()
        if epsilon <= 0:
            raise ValueError(f"LayerNorm: epsilon must be positive, got {epsilon!r}")
        in_channels = check_non_negative_int("LayerNorm", "in_channels", in_channels)
        self._axis, self._epsilon = axis, float(epsilon)
        self.gamma = Parameter("gamma", grad_req="write" if scale else "null", shape=(in_channels,),
                               init=gamma_initializer, allow_deferred_init=True, differentiable=scale, dtype=dtype)
        self.beta = Parameter("beta", grad_req="write" if center else "null", shape=(in_channels,),
                              init=beta_initializer, allow_deferred_init=True, differentiable=center, dtype=dtype)

    def infer_shape(self, x, *args) -> None:
        channels = x.shape[_norm_axis("LayerNorm", self._axis, x)]
        self.gamma.shape = (channels,)
        self.beta.shape = (channels,)

    def forward(self, x):
        axis = _norm_axis("LayerNorm", self._axis, x)
        expected = self.gamma.shape[0]
        if expected and x.shape[axis] != expected:
            raise ShapeError(f"expected size {expected} on axis {self._axis}, got input of shape {x.shape}")
        return layer_ops.layer_norm(x, self.gamma.data(), self.beta.data(), axis=axis, eps=self._epsilon)

    def __repr__(self) -> str:
        return f"LayerNorm(axis={self._axis}, eps={self._epsilon}, in_channels={self.gamma.shape[0] or None})"


class Embedding(HybridBlock):
    """Lookup table: integer indices of any shape -> vectors of size ``output_dim``.

    weight has shape ``(input_dim, output_dim)``; out-of-range indices are clipped.
    """

    def __init__(self, input_dim: int, output_dim: int, dtype: Any = "float32", weight_initializer: Any = None,
                 sparse_grad: bool = False):
        super().__init__()
        if sparse_grad:
            _compat.ignored_argument("Embedding", "sparse_grad", sparse_grad, "gradients are dense arrays")
        self._input_dim = check_positive_int("Embedding", "input_dim", input_dim)
        self._output_dim = check_positive_int("Embedding", "output_dim", output_dim)
        self.weight = Parameter("weight", shape=(input_dim, output_dim), dtype=dtype, init=weight_initializer)

    def forward(self, x):
        if not (jnp.issubdtype(x.dtype, jnp.integer) or jnp.issubdtype(x.dtype, jnp.floating)):
            raise ShapeError(f"expected integer indices, got dtype {x.dtype}")
        return layer_ops.embedding(x, self.weight.data())

    def __repr__(self) -> str:
        return f"Embedding({self._input_dim} -> {self._output_dim}, {self.weight.dtype.name})"


class Flatten(HybridBlock):
    """Reshape ``(batch, d1, d2, ...)`` to ``(batch, d1 * d2 * ...)``."""

    def forward(self, x):
        if x.ndim < 1:
            raise ShapeError(f"expected an input with a batch axis, got a scalar of shape {x.shape}")
        return x.reshape(x.shape[0], -1)

    def __repr__(self) -> str:
        return "Flatten"


def _resolve_function(layer: str, function: Callable | str) -> Callable:
    if callable(function):
        return function
    if isinstance(function, str):
        for namespace in (jnp, jax.nn):
            fn = getattr(namespace, function, None)
            if callable(fn):
                return fn
        raise ValueError(f"{layer}: no function named {function!r} in jax.numpy or jax.nn")
    raise TypeError(f"{layer}: expected a callable or a function name, got {type(function).__name__}")


class Lambda(Block):
    """Wrap a function (or the name of a ``jax.numpy``/``jax.nn`` function) as a Block."""

    def __init__(self, function: Callable | str):
        super().__init__()
        self._func = _resolve_function("Lambda", function)

    def forward(self, *args):
        return self._func(*args)

    def __repr__(self) -> str:
        return f"Lambda({getattr(self._func, '__name__', self._func)})"


class HybridLambda(HybridBlock):
    """Wrap a pure JAX function (or a ``jax.numpy``/``jax.nn`` name) as a HybridBlock."""

    def __init__(self, function: Callable | str):
        super().__init__()
        self._func = _resolve_function("HybridLambda", function)

    def forward(self, *args):
        return self._func(*args)

    def __repr__(self) -> str:
        return f"HybridLambda({getattr(self._func, '__name__', self._func)})"


class Identity(HybridBlock):
    """Returns its input unchanged (a placeholder, e.g. for a skipped branch)."""

    def forward(self, x):
        return x

    def __repr__(self) -> str:
        return "Identity()"


class _ConcatenateMixin:
    """Runs every child on the same input and concatenates their outputs along ``axis``."""

    def __init__(self, axis: int = -1):
        super().__init__()
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
            raise ValueError(f"{type(self).__name__}: axis must be an int, got {axis!r}")
        self._axis = int(axis)

    def forward(self, x):
        if not self._children:
            raise ValueError(f"{type(self).__name__} has no children; add blocks with .add()")
        outputs = [block(x) for block in self._children.values()]
        try:
            return jnp.concatenate(outputs, axis=self._axis)
        except (TypeError, ValueError) as exc:
            raise ShapeError(f"cannot concatenate the outputs of the children, of shapes "
                             f"{[tuple(o.shape) for o in outputs]}, along axis {self._axis}") from exc

    def __getitem__(self, key: int | slice) -> Any:
        if isinstance(key, slice):
            net = type(self)(self._axis)
            net.add(*list(self._children.values())[key])
            return net
        return super().__getitem__(key)


class Concatenate(_ConcatenateMixin, Sequential):
    """A container (plain Block) whose children all run on the same input; their outputs are
    concatenated along ``axis`` (default -1). Children are added with ``add()``. Raises ShapeError
    when the outputs do not match on the other axes."""


class HybridConcatenate(_ConcatenateMixin, HybridSequential):
    """Concatenate for HybridBlock children, so the whole branch can be hybridized."""
