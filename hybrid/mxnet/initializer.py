"""``mxnet.initializer`` (``mx.init``): hybrid's initializers (``hybrid.init``) under MXNet's names, and
MXNet's initializers that choose by a parameter's name: ``Mixed``, ``Load`` and ``FusedRNN``.

In Gluon code a parameter's name is its key in ``collect_params()`` (``'0.weight'``, ``'dense.bias'``);
called as MXNet's ``init(name, arr)`` it is the name given.
"""
from __future__ import annotations

import logging
import re
from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np

from ..init import *  # noqa: F401,F403
from ..init import __all__ as _names
from ..init import InitDesc, Initializer, create, register

__all__ = list(_names) + ["Mixed", "Load", "FusedRNN"]


class Mixed(Initializer):
    """The initializer of the first of ``patterns`` (regular expressions, matched at the start of the
    name as ``re.match``) that matches a parameter's name: ``Mixed(['.*bias', '.*'], [Zero(), Xavier()])``.
    Raises ValueError when the lists differ in length, or when a name matches no pattern; TypeError for an
    initializer that is None."""

    def __init__(self, patterns: Sequence[str], initializers: Sequence[Any]):
        if len(patterns) != len(initializers):
            raise ValueError(f"Mixed: {len(patterns)} patterns but {len(initializers)} initializers")
        chosen = [create(i) for i in initializers]
        if any(i is None for i in chosen):
            raise TypeError("Mixed: every initializer must be an Initializer, a name or a callable, not None")
        self.patterns = list(patterns)
        self.initializers: list[Initializer] = [i for i in chosen if i is not None]
        self._map = [(re.compile(p), i) for p, i in zip(self.patterns, self.initializers)]

    def _choose(self, name: str | None) -> Initializer:
        for pattern, initializer in self._map:
            if pattern.match(name or ""):
                return initializer
        raise ValueError(f"Parameter name {name} did not match any pattern of Mixed {self.patterns}. "
                         "Consider adding a \".*\" pattern at the end with a default initializer")

    def for_parameter(self, name, shape, dtype="float32"):
        return self._choose(name).for_parameter(name, shape, dtype)

    def _fill(self, desc, arr):
        self._choose(desc)(desc, arr)

    def _generate(self, shape, dtype):
        return self.for_parameter(None, shape, dtype)


class Load(Initializer):
    """Values by name from ``param``, a dict of arrays or the path of an MXNet ``.params`` file (``arg:`` and
    ``aux:`` prefixes are dropped); a name not there gets ``default_init``. ``verbose`` logs (INFO) where
    each value came from. Raises ValueError for a shape that differs from the parameter's, or for a name
    not there without ``default_init``."""

    def __init__(self, param: Any, default_init: Any = None, verbose: bool = False):
        if isinstance(param, str):
            from .ndarray import load
            param = load(param)
        if not isinstance(param, dict):
            raise TypeError(f"Load: param must be a dict of arrays or a .params file holding one, got "
                            f"{type(param).__name__}")
        self.param = {(k[4:] if k.startswith(("arg:", "aux:")) else k): np.asarray(v) for k, v in param.items()}
        self.default_init = create(default_init)
        self.verbose = verbose

    def for_parameter(self, name, shape, dtype="float32"):
        if name in self.param:
            value = self.param[name]
            if tuple(value.shape) != tuple(shape):
                raise ValueError(f"Load: parameter {name} has shape {tuple(shape)} but the loaded value has shape "
                                 f"{tuple(value.shape)}")
            if self.verbose:
                logging.info("Initialized %s by loading", name)
            return jnp.asarray(value, dtype=dtype)
        if self.default_init is None:
            raise ValueError(f"Load: cannot initialize {name}: not among the loaded names "
                             f"{sorted(self.param)} and no default_init given")
        if self.verbose:
            logging.info("Initialized %s by default", name)
        return self.default_init.for_parameter(name, shape, dtype)

    def _fill(self, desc, arr):
        if desc in self.param or self.default_init is None:
            arr[:] = self.for_parameter(desc, tuple(arr.shape), getattr(arr, "dtype", "float32"))
        else:
            if self.verbose:
                logging.info("Initialized %s by default", desc)
            self.default_init(desc, arr)

    def _generate(self, shape, dtype):
        return self.for_parameter(None, shape, dtype)

    def __eq__(self, other: Any) -> bool:
        return self is other

    __hash__ = Initializer.__hash__


_GATES = {"rnn_relu": [""], "rnn_tanh": [""], "lstm": ["_i", "_f", "_c", "_o"], "gru": ["_r", "_z", "_o"]}


@register
class FusedRNN(Initializer):
    """Initializes the packed parameter vector of a fused RNN (``mx.sym.RNN``'s ``parameters``, cuDNN's
    layout): every gate's ``i2h``/``h2h`` weight and bias, per layer and direction, is initialized
    alone by ``init`` (or, called as ``init(desc, arr)``, by the initializer that was called), named as
    MXNet's ``FusedRNNCell`` names them (``l0_i2h_i_weight``, ``r1_h2h_o_bias``, ...) so that biases
    get zeros; an LSTM's forget-gate biases get ``forget_bias``. Raises ValueError for an unknown
    ``mode`` or a vector whose size fits no input size."""

    def __init__(self, init: Any, num_hidden: int, num_layers: int, mode: str, bidirectional: bool = False,
                 forget_bias: float = 1.0):
        if mode not in _GATES:
            raise ValueError(f"FusedRNN: mode must be one of {sorted(_GATES)}, got {mode!r}")
        self.init = create(init)
        self.num_hidden, self.num_layers, self.mode = int(num_hidden), int(num_layers), mode
        self.bidirectional, self.forget_bias = bool(bidirectional), forget_bias

    def _kwargs(self) -> dict:
        return {"init": self.init.dumps() if self.init is not None else None, "num_hidden": self.num_hidden,
                "num_layers": self.num_layers, "mode": self.mode, "bidirectional": self.bidirectional,
                "forget_bias": self.forget_bias}

    def _pieces(self, size: int) -> list[tuple[str, tuple[int, ...]]]:
        """(name, shape) of each piece of the packed vector, in its order."""
        gates, h = _GATES[self.mode], self.num_hidden
        directions = ["l", "r"] if self.bidirectional else ["l"]
        b, m = len(directions), len(gates)
        inputs = size // b // h // m - (self.num_layers - 1) * (h + b * h + 2) - h - 2
        pieces: list[tuple[str, tuple[int, ...]]] = []
        for layer in range(self.num_layers):
            for d in directions:
                pieces += [(f"{d}{layer}_i2h{g}_weight", (h, inputs if layer == 0 else b * h)) for g in gates]
                pieces += [(f"{d}{layer}_h2h{g}_weight", (h, h)) for g in gates]
        for layer in range(self.num_layers):
            for d in directions:
                pieces += [(f"{d}{layer}_{kind}{g}_bias", (h,)) for kind in ("i2h", "h2h") for g in gates]
        if inputs <= 0 or sum(int(np.prod(s)) for _, s in pieces) != size:
            raise ValueError(f"FusedRNN: {size} values fit no {self.mode} of {self.num_layers} layer(s), "
                             f"{h} hidden units{', bidirectional' if self.bidirectional else ''}")
        return pieces

    def _values(self, fallback: Initializer | None, size: int, dtype: Any) -> jnp.ndarray:
        parts = []
        for name, shape in self._pieces(size):
            if self.mode == "lstm" and name.endswith("_f_bias"):
                parts.append(np.full(shape, self.forget_bias))
                continue
            inner = self.init if self.init is not None else fallback
            if inner is None:
                raise ValueError("FusedRNN: init=None uses the initializer that was called; call it as "
                                 "init(desc, arr) from another initializer, or give init")
            arr = np.zeros(shape, np.float32)
            inner(InitDesc(name, global_init=fallback), arr)
            parts.append(arr)
        return jnp.asarray(np.concatenate([np.ravel(p) for p in parts]), dtype=dtype)

    def for_parameter(self, name, shape, dtype="float32"):
        return self._values(getattr(name, "global_init", None), int(np.prod(shape)), dtype).reshape(shape)

    def _init_weight(self, desc, arr):
        fallback = getattr(desc, "global_init", None)
        arr[:] = self._values(fallback, int(np.prod(arr.shape)), getattr(arr, "dtype", "float32")).reshape(arr.shape)

    def _fill(self, desc, arr):
        own = desc.attrs.get("__init__") if isinstance(desc, InitDesc) else None
        if own or not desc.endswith("weight"):
            return super()._fill(desc, arr)
        if isinstance(desc, InitDesc) and desc.global_init is None:
            desc.global_init = self
        self._init_weight(desc, arr)


def __getattr__(name: str):
    raise AttributeError(f"module 'mx.init' has no attribute {name!r}")
