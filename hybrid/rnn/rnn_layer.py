"""Fused recurrent layers RNN, LSTM and GRU: a ``lax.scan`` over time per layer and direction."""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from .. import autograd
from .. import random as _random
from ..block import HybridBlock
from ..errors import ShapeError
from ..graph import layer_ops
from ..nn.basic_layers import as_float, check_non_negative_int, check_positive_int, check_rate
from ..parameter import Parameter
from .rnn_cell import BidirectionalCell, DropoutCell, GRUCell, HybridSequentialRNNCell, LSTMCell, RNNCell
from ._states import check_states, initial_states

__all__ = ["RNN", "LSTM", "GRU"]


class _RNNLayer(HybridBlock):
    """Multi-layer, optionally bidirectional recurrent layer with MXNet's parameters.

    Per layer ``i`` and direction (``l`` forward, ``r`` reverse) it holds ``{d}{i}_i2h_weight``
    ``(G*hidden_size, in)``, ``{d}{i}_h2h_weight`` ``(G*hidden_size, hidden_size)``, ``{d}{i}_i2h_bias`` and
    ``{d}{i}_h2h_bias`` ``(G*hidden_size,)``, G the number of gates; ``in`` is ``input_size`` for layer 0
    (0: inferred at the first call) and ``hidden_size * directions`` above. An LSTM with ``projection_size``
    P also holds ``{d}{i}_h2r_weight (P, hidden_size)``; its ``h2h_weight`` is ``(4*hidden_size, P)`` and the
    layers above the first take ``P * directions`` features.
    """

    _mode: str  # a key of layer_ops.RNN_GATES, set by subclasses
    _projection_size: int | None = None

    def __init__(self, hidden_size: int, num_layers: int = 1, layout: str = "TNC", dropout: float = 0.0,
                 bidirectional: bool = False, input_size: int = 0, i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", dtype: Any = "float32", projection_size: int | None = None,
                 h2r_weight_initializer: Any = None):
        super().__init__()
        name = type(self).__name__
        if projection_size is not None:
            self._projection_size = check_positive_int(name, "projection_size", projection_size)
        self._hidden_size = check_positive_int(name, "hidden_size", hidden_size)
        self._num_layers = check_positive_int(name, "num_layers", num_layers)
        input_size = check_non_negative_int(name, "input_size", input_size)
        if layout not in ("TNC", "NTC"):
            raise ValueError(f"{name}: layout must be 'TNC' or 'NTC', got {layout!r}")
        self._layout, self._dropout = layout, check_rate(name, "dropout", dropout)
        self._directions = ("l", "r") if bidirectional else ("l",)
        rows = layer_ops.RNN_GATES[self._mode] * hidden_size
        inits = {"i2h_weight": i2h_weight_initializer, "h2h_weight": h2h_weight_initializer,
                 "i2h_bias": i2h_bias_initializer, "h2h_bias": h2h_bias_initializer,
                 "h2r_weight": h2r_weight_initializer}
        in_size, out_size = input_size, self._output_size
        for layer in range(num_layers):
            shapes = {"i2h_weight": (rows, in_size), "h2h_weight": (rows, out_size), "i2h_bias": (rows,),
                      "h2h_bias": (rows,)}
            if self._projection_size:
                shapes["h2r_weight"] = (out_size, hidden_size)
            for d in self._directions:
                for kind, shape in shapes.items():
                    setattr(self, f"{d}{layer}_{kind}", Parameter(f"{d}{layer}_{kind}", shape=shape, dtype=dtype,
                                                                  init=inits[kind], allow_deferred_init=True))
            in_size = out_size * len(self._directions)

    def _file_names(self) -> dict[str, str]:
        """MXNet 1.x's names in ``save_parameters`` files: ``_unfused.{layer}.{kind}`` (one direction) or
        ``_unfused.{layer}.{l|r}_cell.{kind}`` (bidirectional), the names of the cells of :meth:`_unfuse`."""
        names = {}
        for name in self._reg_params:
            direction, rest = name[0], name[1:]
            layer, kind = rest.split("_", 1)
            cell = f"{direction}_cell." if len(self._directions) == 2 else ""
            names[name] = f"_unfused.{layer}.{cell}{kind}"
        return names

    def _unfuse(self) -> Any:
        """The layer as a :class:`HybridSequentialRNNCell` of cells (a :class:`BidirectionalCell` per layer
        when bidirectional, a :class:`DropoutCell` between layers when ``dropout`` > 0) that share this
        layer's parameters, as MXNet 1.x's ``_unfuse``. Raises NotImplementedError with ``projection_size``."""
        if self._projection_size:
            raise NotImplementedError(f"{type(self).__name__}._unfuse: a layer with projection_size has no "
                                      "unfused form (as in MXNet)")
        make = {"rnn_relu": lambda **kw: RNNCell(self._hidden_size, activation="relu", **kw),
                "rnn_tanh": lambda **kw: RNNCell(self._hidden_size, activation="tanh", **kw),
                "lstm": lambda **kw: LSTMCell(self._hidden_size, **kw),
                "gru": lambda **kw: GRUCell(self._hidden_size, **kw)}[self._mode]
        kinds = ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias")

        def cell(direction: str, layer: int) -> Any:
            made = make(prefix=f"{direction}{layer}_")
            for kind in kinds:
                setattr(made, kind, getattr(self, f"{direction}{layer}_{kind}"))
            return made
        stack = HybridSequentialRNNCell(prefix=self.prefix)
        with stack.name_scope():
            for layer in range(self._num_layers):
                if len(self._directions) == 2:
                    stack.add(BidirectionalCell(cell("l", layer), cell("r", layer)))
                else:
                    stack.add(cell("l", layer))
                if self._dropout and layer < self._num_layers - 1:
                    stack.add(DropoutCell(self._dropout))
        return stack

    def _param(self, direction: str, layer: int, kind: str) -> jax.Array:
        return getattr(self, f"{direction}{layer}_{kind}").data()

    @property
    def _output_size(self) -> int:
        """Features of each direction's output and ``h`` state: ``projection_size`` if given, else hidden_size."""
        return self._projection_size or self._hidden_size

    def state_info(self, batch_size: int = 0) -> list[dict]:
        """Shapes of the states: ``(num_layers * directions, batch_size, hidden_size)``, layout ``'LNC'``
        (with ``projection_size``, the LSTM's ``h`` has ``projection_size`` features)."""
        layers = self._num_layers * len(self._directions)
        sizes = [self._output_size] + ([self._hidden_size] if self._mode == "lstm" else [])
        return [{"shape": (layers, batch_size, size), "__layout__": "LNC"} for size in sizes]

    def begin_state(self, batch_size: int = 0, func: Callable = jnp.zeros, ctx: Any = None, device: Any = None,
                    **kwargs: Any) -> list:
        """Initial states, ``func(shape, **kwargs)`` for each entry of :meth:`state_info` (zeros by default).

        ``ctx`` (Gluon's name) or ``device``: a ``jax.Device`` the states are placed on (default: JAX's).
        """
        return initial_states(type(self).__name__, self.state_info(batch_size), func, ctx, device, kwargs)

    def _input_size(self, inputs) -> int:
        if inputs.ndim != 3:
            raise ShapeError(f"expected a 3-D input in layout {self._layout!r}, got shape {inputs.shape}")
        return inputs.shape[2]

    def infer_shape(self, inputs, *args, **kwargs) -> None:
        rows = layer_ops.RNN_GATES[self._mode] * self._hidden_size
        for d in self._directions:
            getattr(self, f"{d}0_i2h_weight").shape = (rows, self._input_size(inputs))

    def forward(self, inputs, states=None):
        size, expected = self._input_size(inputs), self.l0_i2h_weight.shape[1]
        if expected and size != expected:
            raise ShapeError(f"expected inputs with {expected} features on the last axis, got shape {inputs.shape}")
        x = as_float(inputs, self.l0_h2h_weight.dtype)
        if self._layout == "NTC":
            x = jnp.swapaxes(x, 0, 1)
        given = states is not None
        infos = self.state_info(x.shape[1])
        states = check_states(states, infos) if given else self.begin_state(x.shape[1], dtype=x.dtype)
        out, states = self._run_layers(x, states)
        if self._layout == "NTC":
            out = jnp.swapaxes(out, 0, 1)
        return (out, states) if given else out

    def _run_layers(self, x, states: list) -> tuple[jax.Array, list]:
        h0, c0 = states[0], states[1] if self._mode == "lstm" else None
        new_h, new_c = [], []
        for layer in range(self._num_layers):
            outputs = []
            for d, direction in enumerate(self._directions):
                index = layer * len(self._directions) + d
                p = lambda kind, direction=direction, layer=layer: self._param(direction, layer, kind)  # noqa: E731
                if self._projection_size:
                    y, h, c = layer_ops.projected_lstm_layer(x, h0[index], c0[index], p("i2h_weight"),
                                                             p("h2h_weight"), p("i2h_bias"), p("h2h_bias"),
                                                             p("h2r_weight"), reverse=direction == "r")
                else:
                    y, h, c = layer_ops.rnn_layer(x, h0[index], None if c0 is None else c0[index], p("i2h_weight"),
                                                  p("h2h_weight"), p("i2h_bias"), p("h2h_bias"), mode=self._mode,
                                                  reverse=direction == "r")
                outputs.append(y)
                new_h.append(h)
                new_c.append(c)
            x = outputs[0] if len(outputs) == 1 else jnp.concatenate(outputs, axis=-1)
            if self._dropout and layer < self._num_layers - 1 and autograd.is_training():
                x = layer_ops.dropout(x, _random.next_key(), rate=self._dropout)
        return x, [jnp.stack(new_h)] + ([jnp.stack(new_c)] if c0 is not None else [])

    def __repr__(self) -> str:
        in_size = self.l0_i2h_weight.shape[1] or None
        extras = f", projection_size={self._projection_size}" if self._projection_size else ""
        extras += f", num_layers={self._num_layers}" if self._num_layers > 1 else ""
        extras += ", bidirectional" if len(self._directions) == 2 else ""
        extras += f", dropout={self._dropout}" if self._dropout else ""
        return f"{type(self).__name__}({in_size} -> {self._hidden_size}, {self._layout}{extras})"


_LAYER_DOC = """

    Args:
        hidden_size: features of the hidden state.
        num_layers: stacked layers; with ``dropout`` > 0, dropout is applied to the outputs of every
            layer but the last in training mode.
        layout: ``'TNC'`` (time, batch, features; the default) or ``'NTC'``.
        bidirectional: add a reverse-direction pass per layer; outputs concatenate both directions.
        input_size: input features, 0 to infer them at the first call.
        i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer, h2h_bias_initializer:
            initializers of the parameters (biases default to zeros).
    ``forward(inputs, states=None)``: inputs ``(T, N, C)`` (``'TNC'``) or ``(N, T, C)``. Without
    ``states`` the states start at zero and only the output ``(T, N, directions * hidden_size)`` (in
    ``layout``) is returned; with ``states`` (a list as from :meth:`begin_state`) it returns
    ``(output, new_states)``. States have shape ``(num_layers * directions, N, hidden_size)``, ordered
    layer by layer, forward direction first. Raises ShapeError for inputs or states of the wrong shape.
    """


class RNN(_RNNLayer):
    __doc__ = ("Elman recurrent layer, ``h_t = activation(W_ih x_t + b_ih + W_hh h_(t-1) + b_hh)`` with "
               "``activation`` ``'relu'`` (default) or ``'tanh'``; one gate (G = 1)." + _LAYER_DOC)

    _mode = "rnn_relu"

    def __init__(self, hidden_size: int, num_layers: int = 1, activation: str = "relu", layout: str = "TNC",
                 dropout: float = 0.0, bidirectional: bool = False, i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", input_size: int = 0, dtype: Any = "float32"):
        if activation not in ("relu", "tanh"):
            raise ValueError(f"RNN: activation must be 'relu' or 'tanh', got {activation!r}")
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, dtype)
        self._mode = "rnn_" + activation


class LSTM(_RNNLayer):
    __doc__ = ("Long short-term memory layer (Hochreiter and Schmidhuber, 1997) with MXNet's gate order "
               "i, f, g, o (G = 4): ``c_t = f * c_(t-1) + i * g``, ``h_t = o * tanh(c_t)``, i, f, o sigmoid, "
               "g tanh of ``W_ih x_t + b_ih + W_hh h_(t-1) + b_hh``. States are ``[h, c]``. With "
               "``projection_size`` P (Sak et al., 2014; ``h2r_weight_initializer`` initialises ``W_hr``), the "
               "output and the state fed back are ``r_t = W_hr h_t`` (P features, so the ``h`` state is "
               "``(num_layers * directions, N, P)``), as :class:`LSTMPCell` computes." + _LAYER_DOC)

    _mode = "lstm"

    def __init__(self, hidden_size: int, num_layers: int = 1, layout: str = "TNC", dropout: float = 0.0,
                 bidirectional: bool = False, input_size: int = 0, i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", projection_size: int | None = None,
                 h2r_weight_initializer: Any = None, dtype: Any = "float32"):
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, dtype, projection_size, h2r_weight_initializer)


class GRU(_RNNLayer):
    __doc__ = ("Gated recurrent unit layer (Cho et al., 2014) with MXNet's (and cuDNN's) formulation, gates "
               "r, z, n (G = 3): ``r, z = sigmoid(W_i. x + b_i. + W_h. h + b_h.)``, ``n = tanh(W_in x + b_in + "
               "r * (W_hn h + b_hn))``, ``h_t = (1 - z) * n + z * h_(t-1)``." + _LAYER_DOC)

    _mode = "gru"
