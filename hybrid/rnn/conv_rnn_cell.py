"""Convolutional recurrent cells (Shi et al., 2015): RNN, LSTM and GRU cells whose input-to-hidden and
hidden-to-hidden maps are convolutions, in 1, 2 and 3 spatial dimensions, with Gluon's names and parameters."""
from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from ..errors import ShapeError
from ..graph import layer_ops
from ..nn.basic_layers import as_float, check_positive_int
from ..parameter import Parameter
from .rnn_cell import HybridRecurrentCell, _activate, check_activation
from ._states import check_states

__all__ = ["Conv1DRNNCell", "Conv2DRNNCell", "Conv3DRNNCell", "Conv1DLSTMCell", "Conv2DLSTMCell", "Conv3DLSTMCell",
           "Conv1DGRUCell", "Conv2DGRUCell", "Conv3DGRUCell"]

_LAYOUTS = {1: ("NCW", "NWC"), 2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}


def _spec(who: str, arg: str, value: Any, dims: int, minimum: int) -> tuple[int, ...]:
    """An int or a tuple of ``dims`` ints, each ``>= minimum``, as a tuple; ValueError otherwise."""
    values = (value,) * dims if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else value
    try:
        values = tuple(values)
    except TypeError:
        values = ()
    if len(values) != dims or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum
                                  for v in values):
        raise ValueError(f"{who}: {arg} must be an int or a tuple of {dims} ints >= {minimum}, got {value!r}")
    return tuple(int(v) for v in values)


class _ConvCell(HybridRecurrentCell):
    """Base of the convolutional cells: ``i2h_weight`` convolves each step's input, ``h2h_weight`` the hidden
    state (padded so that the state keeps its spatial size), both with ``G * hidden_channels`` filters for
    G gates, plus ``i2h_bias`` and ``h2h_bias`` ``(G * hidden_channels,)``.

    Weights are ``(G*hidden, in_channels, *kernel)`` for channels-first ``conv_layout`` and
    ``(G*hidden, *kernel, in_channels)`` for channels-last (Gluon's layouts).
    """

    _dims: int  # spatial dimensions, set by subclasses
    _gates: int  # G
    _states: int = 1

    def __init__(self, input_shape: tuple[int, ...], hidden_channels: int, i2h_kernel: Any, h2h_kernel: Any,
                 i2h_pad: Any = 0, i2h_dilate: Any = 1, h2h_dilate: Any = 1, i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", conv_layout: str | None = None, activation: Any = "tanh",
                 dtype: Any = "float32"):
        super().__init__()
        name, dims = type(self).__name__, self._dims
        conv_layout = _LAYOUTS[dims][0] if conv_layout is None else conv_layout
        if conv_layout not in _LAYOUTS[dims]:
            raise ValueError(f"{name}: conv_layout must be one of {_LAYOUTS[dims]}, got {conv_layout!r}")
        self._hidden_channels = check_positive_int(name, "hidden_channels", hidden_channels)
        self._i2h_kernel = _spec(name, "i2h_kernel", i2h_kernel, dims, 1)
        self._h2h_kernel = _spec(name, "h2h_kernel", h2h_kernel, dims, 1)
        if any(k % 2 == 0 for k in self._h2h_kernel):
            raise ValueError(f"{name}: h2h_kernel sizes must be odd (the state keeps its size), got {h2h_kernel!r}")
        self._i2h_pad = _spec(name, "i2h_pad", i2h_pad, dims, 0)
        self._i2h_dilate = _spec(name, "i2h_dilate", i2h_dilate, dims, 1)
        self._h2h_dilate = _spec(name, "h2h_dilate", h2h_dilate, dims, 1)
        self._h2h_pad = tuple(d * (k - 1) // 2 for d, k in zip(self._h2h_dilate, self._h2h_kernel))
        self._layout, self._activation = conv_layout, check_activation(name, "activation", activation)
        self._channels_first = conv_layout.index("C") == 1

        try:
            input_shape = tuple(int(v) for v in input_shape)
        except (TypeError, ValueError):
            input_shape = ()
        if len(input_shape) != dims + 1:
            raise ValueError(f"{name}: input_shape must be one step's shape without the batch axis, "
                             f"{dims + 1} ints in layout {conv_layout[1:]!r}, got {input_shape!r}")
        in_channels = input_shape[0] if self._channels_first else input_shape[-1]
        spatial = input_shape[1:] if self._channels_first else input_shape[:-1]
        if any(v <= 0 for v in spatial):
            raise ValueError(f"{name}: the spatial sizes of input_shape must be positive, got {input_shape!r}")
        out = tuple(x + 2 * p - d * (k - 1) for x, k, p, d in
                    zip(spatial, self._i2h_kernel, self._i2h_pad, self._i2h_dilate))
        if any(v <= 0 for v in out):
            raise ValueError(f"{name}: i2h_kernel {self._i2h_kernel} (dilation {self._i2h_dilate}, padding "
                             f"{self._i2h_pad}) does not fit the input's spatial size {spatial}")
        self._spatial, self._in_channels = spatial, max(in_channels, 0)  # -1 or 0: inferred at the first call
        hidden = self._hidden_channels
        self._state_shape = (hidden,) + out if self._channels_first else out + (hidden,)
        rows = self._gates * hidden
        self.i2h_weight = Parameter("i2h_weight", shape=self._weight_shape(self._i2h_kernel, self._in_channels),
                                    dtype=dtype, init=i2h_weight_initializer, allow_deferred_init=True)
        self.h2h_weight = Parameter("h2h_weight", shape=self._weight_shape(self._h2h_kernel, hidden), dtype=dtype,
                                    init=h2h_weight_initializer)
        self.i2h_bias = Parameter("i2h_bias", shape=(rows,), dtype=dtype, init=i2h_bias_initializer)
        self.h2h_bias = Parameter("h2h_bias", shape=(rows,), dtype=dtype, init=h2h_bias_initializer)

    def _weight_shape(self, kernel: tuple[int, ...], in_channels: int) -> tuple[int, ...]:
        rows = self._gates * self._hidden_channels
        return (rows, in_channels) + kernel if self._channels_first else (rows,) + kernel + (in_channels,)

    def _weight_in_channels(self) -> int:
        return self.i2h_weight.shape[1 if self._channels_first else -1]

    def _step_rank(self) -> int | None:
        return self._dims + 2

    def state_info(self, batch_size: int = 0) -> list[dict]:
        """``[{'shape': (batch_size, *state), '__layout__': conv_layout}]``, one per state; ``state`` is
        ``(hidden_channels, *out)`` channels-first, ``(*out, hidden_channels)`` channels-last, ``out`` the
        input's spatial size after the i2h convolution."""
        return [{"shape": (batch_size,) + self._state_shape, "__layout__": self._layout}
                for _ in range(self._states)]

    def _step_shape(self, in_channels: Any) -> tuple:
        c = in_channels or "C"
        return ("N", c) + self._spatial if self._channels_first else ("N",) + self._spatial + (c,)

    def infer_shape(self, *args: Any, **kwargs: Any) -> None:
        """Sets ``i2h_weight``'s input channels from a step's inputs ``(inputs, states)``, or Gluon 2.0's form
        ``infer_shape(i, x, is_bidirect)`` with ``x`` a step or a sequence (its trailing ``dims + 1`` axes
        are one step's)."""
        is_index = isinstance(args[0], (int, np.integer)) and not isinstance(args[0], bool)
        x = args[1] if len(args) == 3 and is_index else args[0]
        if x.ndim < self._dims + 1:
            raise ShapeError(f"expected inputs of shape {self._step_shape(None)}, got shape {x.shape}")
        step = x.shape[-(self._dims + 1):]
        channels = step[0] if self._channels_first else step[-1]
        self.i2h_weight.shape = self._weight_shape(self._i2h_kernel, channels)

    def _check_inputs(self, inputs) -> None:
        expected = self._step_shape(self._weight_in_channels())
        got = tuple(inputs.shape)
        if len(got) != len(expected) or any(e != g for e, g in zip(expected, got) if not isinstance(e, str)):
            raise ShapeError(f"expected one time step of shape {expected} (layout {self._layout!r}), "
                             f"got shape {got}")

    def _convolutions(self, inputs, h):
        """``(i2h, h2h)``, each with ``G * hidden_channels`` channels."""
        weight = self.i2h_weight.data()
        i2h = layer_ops.convolution(as_float(inputs, weight.dtype), weight, self.i2h_bias.data(),
                                    strides=(1,) * self._dims, padding=self._i2h_pad, dilation=self._i2h_dilate,
                                    layout=self._layout)
        h2h = layer_ops.convolution(h, self.h2h_weight.data(), self.h2h_bias.data(), strides=(1,) * self._dims,
                                    padding=self._h2h_pad, dilation=self._h2h_dilate, layout=self._layout)
        return i2h, h2h

    def forward(self, inputs, states):
        self._check_inputs(inputs)
        states = check_states(states, self.state_info(inputs.shape[0]))
        i2h, h2h = self._convolutions(inputs, states[0])
        axis = 1 if self._channels_first else -1
        return self._gate(jnp.split(i2h, self._gates, axis=axis), jnp.split(h2h, self._gates, axis=axis), states)

    def _gate(self, i2h: list, h2h: list, states: list):
        raise NotImplementedError

    def __repr__(self) -> str:
        in_channels = self._weight_in_channels() or None
        return (f"{type(self).__name__}({in_channels} -> {self._hidden_channels}, {self._activation}, "
                f"{self._layout})")


class _ConvRNN(_ConvCell):
    _gates = 1

    def _gate(self, i2h, h2h, states):
        h = _activate(self._activation, i2h[0] + h2h[0])
        return h, [h]


class _ConvLSTM(_ConvCell):
    _gates, _states = 4, 2

    def _gate(self, i2h, h2h, states):
        i, f, g, o = (x + h for x, h in zip(i2h, h2h))
        sigmoid = layer_ops.ACTIVATIONS["sigmoid"]
        c = sigmoid(f) * states[1] + sigmoid(i) * _activate(self._activation, g)
        h = sigmoid(o) * _activate(self._activation, c)
        return h, [h, c]


class _ConvGRU(_ConvCell):
    _gates = 3

    def _gate(self, i2h, h2h, states):
        sigmoid = layer_ops.ACTIVATIONS["sigmoid"]
        r, z = sigmoid(i2h[0] + h2h[0]), sigmoid(i2h[1] + h2h[1])
        n = _activate(self._activation, i2h[2] + r * h2h[2])
        h = (1 - z) * n + z * states[0]
        return h, [h]


_ARGS = """

    Args:
        input_shape: one step's input shape without the batch axis, in ``conv_layout`` (e.g. ``(C, W)`` for
            ``'NCW'``); the channels may be 0 or -1 to infer them at the first call.
        hidden_channels: channels of the hidden state.
        i2h_kernel, h2h_kernel: kernel sizes of the input and the state convolutions (an int or one per
            spatial axis); ``h2h_kernel`` sizes must be odd.
        i2h_pad, i2h_dilate, h2h_dilate: padding and dilation of the input convolution, dilation of the state
            convolution (which is padded to keep the state's size); an int or one per spatial axis.
        i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer, h2h_bias_initializer:
            initializers (biases default to zeros).
        conv_layout: {layouts}; None (the default) means {default}.
        activation: a name of :class:`hybrid.nn.Activation` or a callable (default ``'tanh'``).

    ``forward(inputs, states) -> (output, new_states)``: inputs ``(N, *input_shape)``; states (as from
    :meth:`begin_state`) ``(N, hidden_channels, *out)`` channels-first or ``(N, *out, hidden_channels)``
    channels-last, ``out`` the spatial size after the input convolution, ``x + 2 * pad - dilate * (kernel -
    1)``; the output is the new ``h``. Raises ValueError for bad arguments, ShapeError for inputs or states of
    the wrong shape.
    """


def _doc(summary: str, dims: int) -> str:
    layouts = _LAYOUTS[dims]
    return summary + _ARGS.format(layouts=" or ".join(f"``{v!r}``" for v in layouts), default=f"``{layouts[0]!r}``")


_RNN = "{d}-D convolutional RNN cell: ``h' = activation(W_i * x + b_i + W_h * h + b_h)``, ``*`` a convolution."
_LSTM = ("{d}-D convolutional LSTM cell (Shi et al., 2015) with gates i, f, c, o (Gluon's order) of ``W_i * x + "
         "b_i + W_h * h + b_h``: ``c' = sigmoid(f) * c + sigmoid(i) * activation(c~)``, ``h' = sigmoid(o) * "
         "activation(c')``; states ``[h, c]``.")
_GRU = ("{d}-D convolutional GRU cell with gates r, z, n (MXNet's formulation): ``r, z = sigmoid(W_i. * x + "
        "b_i. + W_h. * h + b_h.)``, ``n = activation(W_in * x + b_in + r * (W_hn * h + b_hn))``, ``h' = (1 - z) * "
        "n + z * h``.")


class Conv1DRNNCell(_ConvRNN):
    __doc__ = _doc(_RNN.format(d=1), 1)
    _dims = 1


class Conv2DRNNCell(_ConvRNN):
    __doc__ = _doc(_RNN.format(d=2), 2)
    _dims = 2


class Conv3DRNNCell(_ConvRNN):
    __doc__ = _doc(_RNN.format(d=3), 3)
    _dims = 3


class Conv1DLSTMCell(_ConvLSTM):
    __doc__ = _doc(_LSTM.format(d=1), 1)
    _dims = 1


class Conv2DLSTMCell(_ConvLSTM):
    __doc__ = _doc(_LSTM.format(d=2), 2)
    _dims = 2


class Conv3DLSTMCell(_ConvLSTM):
    __doc__ = _doc(_LSTM.format(d=3), 3)
    _dims = 3


class Conv1DGRUCell(_ConvGRU):
    __doc__ = _doc(_GRU.format(d=1), 1)
    _dims = 1


class Conv2DGRUCell(_ConvGRU):
    __doc__ = _doc(_GRU.format(d=2), 2)
    _dims = 2


class Conv3DGRUCell(_ConvGRU):
    __doc__ = _doc(_GRU.format(d=3), 3)
    _dims = 3
