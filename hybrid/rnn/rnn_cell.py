"""Recurrent cells (one time step per call) and their containers, with Gluon's ``unroll``."""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .. import autograd
from .. import random as _random
from ..block import HybridBlock
from ..errors import ShapeError
from ..graph import layer_ops
from ..nn.basic_layers import as_float, check_non_negative_int, check_positive_int, check_rate
from ..parameter import Parameter
from .rnn_layer import check_states, initial_states

__all__ = ["HybridRecurrentCell", "RNNCell", "LSTMCell", "GRUCell", "SequentialRNNCell", "HybridSequentialRNNCell",
           "BidirectionalCell", "DropoutCell", "ModifierCell", "ResidualCell", "ZoneoutCell"]


def _steps(inputs: Any, layout: str) -> list:
    """The per-step ``(N, C)`` inputs of a sequence array (in ``layout``) or list."""
    if isinstance(inputs, (list, tuple)):
        return list(inputs)
    axis = layout.find("T")
    return [jnp.take(inputs, t, axis=axis) for t in range(inputs.shape[axis])]


def _merged(outputs: list, inputs: Any, layout: str, merge_outputs: bool | None) -> Any:
    """Outputs stacked along the time axis of ``layout`` if ``merge_outputs`` (None: like the inputs)."""
    if merge_outputs is None:
        merge_outputs = not isinstance(inputs, (list, tuple))
    return jnp.stack(outputs, axis=layout.find("T")) if merge_outputs else outputs


class HybridRecurrentCell(HybridBlock):
    """Base class of recurrent cells.

    Subclasses implement ``state_info(batch_size)`` (a list of ``{'shape': ..., '__layout__': ...}``) and
    ``forward(inputs, states) -> (output, new_states)`` for one time step: inputs ``(N, C)``, states a
    list of arrays.
    """

    def state_info(self, batch_size: int = 0) -> list[dict]:
        raise NotImplementedError(f"{type(self).__name__} must implement state_info()")

    def begin_state(self, batch_size: int = 0, func: Callable = jnp.zeros, ctx: Any = None, device: Any = None,
                    **kwargs: Any) -> list:
        """Initial states, ``func(shape, **kwargs)`` for each entry of :meth:`state_info` (zeros by default).

        ``ctx`` (Gluon's name) or ``device``: a ``jax.Device`` the states are placed on (default: JAX's).
        """
        return initial_states(type(self).__name__, self.state_info(batch_size), func, ctx, device, kwargs)

    def reset(self) -> None:
        """Gluon compatibility: cells keep no per-sequence Python state, so there is nothing to reset."""

    def unroll(self, length: int, inputs: Any, begin_state: list | None = None, layout: str = "NTC",
               merge_outputs: bool | None = None) -> tuple[Any, list]:
        """Run the cell over ``length`` time steps (a Python loop over steps, as in Gluon).

        Args:
            inputs: an array ``(N, T, C)`` (``layout='NTC'``) or ``(T, N, C)`` (``'TNC'``), or a list of
                ``length`` arrays ``(N, C)``.
            begin_state: initial states (default :meth:`begin_state` zeros).
            merge_outputs: stack the outputs into one array along the time axis; None (default) returns
                the same form as ``inputs``.
        Returns ``(outputs, final_states)``. Raises ValueError for a bad layout, ShapeError when the
        inputs do not hold ``length`` steps.
        """
        name = type(self).__name__
        if layout not in ("NTC", "TNC"):
            raise ValueError(f"{name}.unroll: layout must be 'NTC' or 'TNC', got {layout!r}")
        if isinstance(inputs, (list, tuple)):
            steps = len(inputs)
        else:
            if getattr(inputs, "ndim", 0) != 3:
                raise ShapeError(f"{name}.unroll: expected inputs in layout {layout!r} or a list of (N, C) "
                                 f"arrays, got {getattr(inputs, 'shape', type(inputs).__name__)}")
            steps = inputs.shape[layout.find("T")]
        if steps != length:
            raise ShapeError(f"{name}.unroll: length is {length} but the inputs hold {steps} time steps")
        return self._unroll(inputs, begin_state, layout, merge_outputs)

    def _unroll(self, inputs: Any, begin_state: list | None, layout: str, merge_outputs: bool | None):
        steps = _steps(inputs, layout)
        states = self.begin_state(steps[0].shape[0], dtype=steps[0].dtype) if begin_state is None \
            else list(begin_state)
        outputs = []
        for step in steps:
            out, states = self(step, states)
            outputs.append(out)
        return _merged(outputs, inputs, layout, merge_outputs), states


class _GatedCell(HybridRecurrentCell):
    """A cell with MXNet's parameters ``i2h_weight (G*hidden, input)``, ``h2h_weight (G*hidden, hidden)``,
    ``i2h_bias``, ``h2h_bias (G*hidden,)`` for G gates; ``input_size`` 0 is inferred at the first call."""

    _mode: str  # a key of layer_ops.RNN_GATES, set by subclasses
    _activation: Any = "tanh"
    _recurrent_activation: Any = "sigmoid"

    def __init__(self, hidden_size: int, i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros", input_size: int = 0,
                 dtype: Any = "float32"):
        super().__init__()
        name = type(self).__name__
        self._hidden_size = check_positive_int(name, "hidden_size", hidden_size)
        input_size = check_non_negative_int(name, "input_size", input_size)
        rows = layer_ops.RNN_GATES[self._mode] * hidden_size
        self.i2h_weight = Parameter("i2h_weight", shape=(rows, input_size), dtype=dtype,
                                    init=i2h_weight_initializer, allow_deferred_init=True)
        self.h2h_weight = Parameter("h2h_weight", shape=(rows, hidden_size), dtype=dtype,
                                    init=h2h_weight_initializer)
        self.i2h_bias = Parameter("i2h_bias", shape=(rows,), dtype=dtype, init=i2h_bias_initializer)
        self.h2h_bias = Parameter("h2h_bias", shape=(rows,), dtype=dtype, init=h2h_bias_initializer)

    def state_info(self, batch_size: int = 0) -> list[dict]:
        count = 2 if self._mode == "lstm" else 1
        return [{"shape": (batch_size, self._hidden_size), "__layout__": "NC"} for _ in range(count)]

    def _input_size(self, inputs) -> int:
        if inputs.ndim != 2:
            raise ShapeError(f"expected one time step of shape (N, C), got shape {inputs.shape}")
        return inputs.shape[1]

    def _set_activations(self, activation: Any, recurrent_activation: Any) -> None:
        name = type(self).__name__
        for arg, value in (("activation", activation), ("recurrent_activation", recurrent_activation)):
            if not callable(value) and not (isinstance(value, str) and value in layer_ops.ACTIVATIONS):
                raise ValueError(f"{name}: {arg} must be one of {sorted(layer_ops.ACTIVATIONS)} or a callable, "
                                 f"got {value!r}")
        self._activation, self._recurrent_activation = activation, recurrent_activation

    def infer_shape(self, *args, **kwargs) -> None:
        """Sets ``i2h_weight``'s input size from a step's inputs ``(inputs, states)``, or Gluon 2.0's form
        ``infer_shape(i, x, is_bidirect)``: layer ``i`` of a stack whose first input is ``x`` (layers above the
        first take ``hidden_size`` features, twice that if ``is_bidirect``)."""
        if len(args) == 3 and isinstance(args[0], (int, np.integer)) and not isinstance(args[0], bool):
            i, x, is_bidirect = args
            size = x.shape[-1] if i == 0 else self._hidden_size * (2 if is_bidirect else 1)
        else:
            size = self._input_size(args[0])
        self.i2h_weight.shape = (self.i2h_weight.shape[0], size)

    def forward(self, inputs, states):
        size, expected = self._input_size(inputs), self.i2h_weight.shape[1]
        if expected and size != expected:
            raise ShapeError(f"expected inputs with {expected} features, got shape {inputs.shape}")
        states = check_states(states, self.state_info(inputs.shape[0]))
        x = as_float(inputs, self.h2h_weight.dtype)
        c = states[1] if self._mode == "lstm" else None
        if self._activation == "tanh" and self._recurrent_activation == "sigmoid":  # the fused cell
            h, c = layer_ops.rnn_cell(x, states[0], c, self.i2h_weight.data(), self.h2h_weight.data(),
                                      self.i2h_bias.data(), self.h2h_bias.data(), mode=self._mode)
        else:
            h, c = self._step(x, states[0], c)
        return h, [h] if c is None else [h, c]

    @staticmethod
    def _apply(activation: Any, x):
        return layer_ops.activation(x, activation) if isinstance(activation, str) else activation(x)

    def _step(self, x, h, c):
        """One step with the cell's ``activation`` and ``recurrent_activation`` (Gluon's formulas)."""
        i2h = layer_ops.dense(x, self.i2h_weight.data(), self.i2h_bias.data(), flatten=False)
        h2h = layer_ops.dense(h, self.h2h_weight.data(), self.h2h_bias.data(), flatten=False)
        act, gate = (lambda v: self._apply(self._activation, v)), (lambda v: self._apply(self._recurrent_activation, v))
        if self._mode == "gru":
            xr, xz, xn = jnp.split(i2h, 3, axis=-1)
            hr, hz, hn = jnp.split(h2h, 3, axis=-1)
            r, z = gate(xr + hr), gate(xz + hz)
            n = act(xn + r * hn)
            return (1 - z) * n + z * h, None
        i, f, g, o = jnp.split(i2h + h2h, 4, axis=-1)
        c = gate(f) * c + gate(i) * act(g)
        return gate(o) * act(c), c

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.i2h_weight.shape[1] or None} -> {self._hidden_size})"


class RNNCell(_GatedCell):
    """Elman cell ``h' = activation(W_ih x + b_ih + W_hh h + b_hh)``, ``activation`` ``'tanh'`` (default)
    or ``'relu'``. States ``[h]`` of shape ``(N, hidden_size)``; ``forward(inputs, states) -> (h', [h'])``."""

    _mode = "rnn_tanh"

    def __init__(self, hidden_size: int, activation: str = "tanh", i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", input_size: int = 0, dtype: Any = "float32"):
        if activation not in ("relu", "tanh"):
            raise ValueError(f"RNNCell: activation must be 'relu' or 'tanh', got {activation!r}")
        super().__init__(hidden_size, i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, input_size, dtype)
        self._mode = "rnn_" + activation


class _ActivatedGatedCell(_GatedCell):
    """A gated cell with a candidate ``activation`` and a gate ``recurrent_activation``."""

    def __init__(self, hidden_size: int, i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros", input_size: int = 0,
                 activation: Any = "tanh", recurrent_activation: Any = "sigmoid", dtype: Any = "float32"):
        super().__init__(hidden_size, i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, input_size, dtype)
        self._set_activations(activation, recurrent_activation)


class LSTMCell(_ActivatedGatedCell):
    """LSTM cell with gates i, f, g, o (MXNet's order; see :class:`hybrid.rnn.LSTM`). States ``[h, c]``;
    ``forward(inputs, states) -> (h', [h', c'])``: ``c' = ra(f) * c + ra(i) * a(g)``, ``h' = ra(o) * a(c')``
    for ``a = activation``, ``ra = recurrent_activation``."""

    _mode = "lstm"


class GRUCell(_ActivatedGatedCell):
    """GRU cell with gates r, z, n (MXNet's formulation; see :class:`hybrid.rnn.GRU`). States ``[h]``;
    ``forward(inputs, states) -> (h', [h'])``: ``r = ra(x_r + h_r)``, ``z = ra(x_z + h_z)``,
    ``n = a(x_n + r * h_n)``, ``h' = (1 - z) * n + z * h`` for ``a = activation`` (the candidate's, default
    ``'tanh'``) and ``ra = recurrent_activation`` (the gates', default ``'sigmoid'``): names of
    :class:`hybrid.nn.Activation` or callables. With the defaults the step is one fused operation."""

    _mode = "gru"


class SequentialRNNCell(HybridRecurrentCell):
    """Stacks cells: each step's output feeds the next cell. States are the cells' states, concatenated
    in order. ``unroll`` runs one cell over the whole sequence after the other (so a
    :class:`BidirectionalCell` may be stacked)."""

    def add(self, *cells: HybridRecurrentCell) -> None:
        """Append cells; they are named ``'0'``, ``'1'``, ... in ``collect_params``."""
        for cell in cells:
            if not isinstance(cell, HybridRecurrentCell):
                raise TypeError(f"SequentialRNNCell: expected recurrent cells, got {type(cell).__name__}")
            self.register_child(cell)

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return [info for cell in self._children.values() for info in cell.state_info(batch_size)]

    def _split_states(self, states: list) -> list[list]:
        states, parts = list(states), []
        for cell in self._children.values():
            count = len(cell.state_info())
            parts.append(states[:count])
            states = states[count:]
        return parts

    def forward(self, inputs, states):
        new_states = []
        for cell, cell_states in zip(self._children.values(), self._split_states(states)):
            inputs, cell_states = cell(inputs, cell_states)
            new_states.extend(cell_states)
        return inputs, new_states

    def _unroll(self, inputs, begin_state, layout, merge_outputs):
        if begin_state is None:
            batch = inputs[0].shape[0] if isinstance(inputs, (list, tuple)) else inputs.shape[layout.find("N")]
            begin_state = self.begin_state(batch)
        cells, new_states = list(self._children.values()), []
        for i, (cell, states) in enumerate(zip(cells, self._split_states(begin_state))):
            inputs, states = cell._unroll(inputs, states, layout, merge_outputs if i == len(cells) - 1 else None)
            new_states.extend(states)
        return inputs, new_states

    def infer_shape(self, _i: Any, x: Any = None, is_bidirect: bool = False) -> None:
        """Gluon 2.0's ``infer_shape(i, x, is_bidirect)``: cell ``k`` of the stack gets ``infer_shape(k, x,
        is_bidirect)``."""
        for k, cell in enumerate(self._children.values()):
            cell.infer_shape(k, x, is_bidirect)

    def __getitem__(self, index: int) -> HybridRecurrentCell:
        return list(self._children.values())[index]

    def __len__(self) -> int:
        return len(self._children)


class HybridSequentialRNNCell(SequentialRNNCell):
    """Gluon's hybridizable stack of cells: the same as :class:`SequentialRNNCell` (every hybrid cell is a
    HybridBlock), except that, as in Gluon, ``infer_shape`` gives its cells ``is_bidirect=False``: a stack
    inside a :class:`BidirectionalCell` runs in one direction, so each cell takes its predecessor's output."""

    def infer_shape(self, _i: Any, x: Any = None, is_bidirect: bool = False) -> None:
        for k, cell in enumerate(self._children.values()):
            cell.infer_shape(k, x, False)


class BidirectionalCell(HybridRecurrentCell):
    """Runs ``l_cell`` forward and ``r_cell`` backward in time over a sequence; each step's output is
    the two outputs concatenated (left first). States: ``l_cell``'s then ``r_cell``'s. It cannot be
    stepped (``forward`` raises NotImplementedError); use ``unroll``."""

    def __init__(self, l_cell: HybridRecurrentCell, r_cell: HybridRecurrentCell):
        super().__init__()
        self.l_cell = l_cell
        self.r_cell = r_cell

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return self.l_cell.state_info(batch_size) + self.r_cell.state_info(batch_size)

    def forward(self, inputs, states):
        raise NotImplementedError("BidirectionalCell cannot be stepped; use unroll()")

    def infer_shape(self, i: Any, x: Any = None, is_bidirect: bool = True) -> None:
        """Gluon 2.0's ``infer_shape(i, x, is_bidirect)``: both cells get ``infer_shape(i, x, True)`` (a layer
        above the first takes both directions' outputs)."""
        self.l_cell.infer_shape(i, x, True)
        self.r_cell.infer_shape(i, x, True)

    def _unroll(self, inputs, begin_state, layout, merge_outputs):
        steps = _steps(inputs, layout)
        if begin_state is None:
            begin_state = self.begin_state(steps[0].shape[0], dtype=steps[0].dtype)
        split = len(self.l_cell.state_info())
        left, l_states = self.l_cell._unroll(steps, begin_state[:split], layout, False)
        right, r_states = self.r_cell._unroll(steps[::-1], begin_state[split:], layout, False)
        outputs = [jnp.concatenate([lo, ro], axis=-1) for lo, ro in zip(left, right[::-1])]
        return _merged(outputs, inputs, layout, merge_outputs), l_states + r_states


class DropoutCell(HybridRecurrentCell):
    """Dropout on each step's input in training mode (e.g. between cells of a SequentialRNNCell); no states.

    ``axes`` lists axes of the ``(N, C)`` step sharing one mask value.
    """

    def __init__(self, rate: float, axes: tuple[int, ...] = ()):
        super().__init__()
        self._rate, self._axes = check_rate("DropoutCell", "rate", rate), tuple(axes)

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return []

    def forward(self, inputs, states=None):
        if self._rate and autograd.is_training():
            inputs = layer_ops.dropout(inputs, _random.next_key(), rate=self._rate, axes=self._axes)
        return inputs, [] if states is None else list(states)

    def __repr__(self) -> str:
        return f"DropoutCell(rate={self._rate}, axes={self._axes})"


class ModifierCell(HybridRecurrentCell):
    """Base class of cells that wrap ``base_cell`` (a child named ``base_cell``) and change its steps; states
    and :meth:`begin_state` are the base cell's. Unlike Gluon, the base cell may still be called directly."""

    def __init__(self, base_cell: HybridRecurrentCell):
        super().__init__()
        if not isinstance(base_cell, HybridRecurrentCell):
            raise TypeError(f"{type(self).__name__}: base_cell must be a recurrent cell, "
                            f"got {type(base_cell).__name__}")
        self.base_cell = base_cell

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return self.base_cell.state_info(batch_size)

    def begin_state(self, batch_size: int = 0, func: Callable = jnp.zeros, **kwargs: Any) -> list:
        return self.base_cell.begin_state(batch_size, func, **kwargs)

    def infer_shape(self, *args, **kwargs) -> None:
        if len(args) == 3 and isinstance(args[0], (int, np.integer)):  # Gluon 2.0's (i, x, is_bidirect)
            self.base_cell.infer_shape(*args)

    def forward(self, inputs, states):
        raise NotImplementedError(f"{type(self).__name__} must implement forward()")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_cell!r})"


class ResidualCell(ModifierCell):
    """Residual connection around ``base_cell`` (Wu et al., 2016): each step's output is the base cell's
    output plus the step's input (so their sizes must match); states are the base cell's."""

    def forward(self, inputs, states):
        output, states = self.base_cell(inputs, states)
        return output + inputs, states

    def _unroll(self, inputs, begin_state, layout, merge_outputs):
        steps = _steps(inputs, layout)
        outputs, states = self.base_cell._unroll(steps, begin_state, layout, False)
        return _merged([o + x for o, x in zip(outputs, steps)], inputs, layout, merge_outputs), states


class ZoneoutCell(ModifierCell):
    """Zoneout (Krueger et al., 2016) on ``base_cell``: in training mode each element of a step's output keeps
    the previous step's output with probability ``zoneout_outputs`` (zeros before the first step), and each
    element of the new states keeps the old state's value with probability ``zoneout_states``; in predict mode
    (or with rates 0) it is the base cell. Masks draw keys from :mod:`hybrid.random`, as Dropout does.

    As in Gluon, stepping with ``cell(x, states)`` remembers the previous output on the cell (``reset()``
    forgets it); ``unroll`` keeps it per sequence. Stepping a hybridized (compiled) ZoneoutCell with
    ``zoneout_outputs > 0`` in training mode raises NotImplementedError: use ``unroll``.
    """

    def __init__(self, base_cell: HybridRecurrentCell, zoneout_outputs: float = 0., zoneout_states: float = 0.):
        if isinstance(base_cell, BidirectionalCell):
            raise TypeError("ZoneoutCell: a BidirectionalCell cannot be stepped; wrap the cells under it instead")
        super().__init__(base_cell)
        for name, rate in (("zoneout_outputs", zoneout_outputs), ("zoneout_states", zoneout_states)):
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
                raise ValueError(f"ZoneoutCell: {name} must be a number in [0, 1], got {rate!r}")
        self.zoneout_outputs, self.zoneout_states = float(zoneout_outputs), float(zoneout_states)
        object.__setattr__(self, "_prev_output", None)

    def _runs_compiled(self) -> bool:
        return False  # forward remembers the previous output on the cell

    def reset(self) -> None:
        object.__setattr__(self, "_prev_output", None)

    @staticmethod
    def _keep_new(rate: float, like):
        """True where the new value is kept: an inverted-dropout mask of ones, as Gluon draws it."""
        return layer_ops.dropout(jnp.ones(like.shape, like.dtype), _random.next_key(), rate=rate) != 0

    def _step(self, inputs, states, prev_output):
        output, new_states = self.base_cell(inputs, states)
        if not autograd.is_training():
            return output, new_states
        if self.zoneout_outputs:
            prev = jnp.zeros_like(output) if prev_output is None else prev_output
            output = jnp.where(self._keep_new(self.zoneout_outputs, output), output, prev)
        if self.zoneout_states:
            new_states = [jnp.where(self._keep_new(self.zoneout_states, new), new, old)
                          for new, old in zip(new_states, states)]
        return output, list(new_states)

    def forward(self, inputs, states):
        if self.zoneout_outputs and autograd.is_training() and isinstance(inputs, jax.core.Tracer):
            raise NotImplementedError("ZoneoutCell: a compiled (hybridized) ZoneoutCell with zoneout_outputs > 0 "
                                      "cannot carry the previous output between calls in training; use unroll()")
        output, states = self._step(inputs, states, self._prev_output)
        object.__setattr__(self, "_prev_output", None if isinstance(output, jax.core.Tracer) else output)
        return output, states

    def _unroll(self, inputs, begin_state, layout, merge_outputs):
        steps = _steps(inputs, layout)
        states = self.begin_state(steps[0].shape[0], dtype=steps[0].dtype) if begin_state is None \
            else list(begin_state)
        outputs, prev = [], None
        for step in steps:
            prev, states = self._step(step, states, prev)
            outputs.append(prev)
        return _merged(outputs, inputs, layout, merge_outputs), states

    def __repr__(self) -> str:
        return f"ZoneoutCell(p_out={self.zoneout_outputs}, p_state={self.zoneout_states}, {self.base_cell!r})"
