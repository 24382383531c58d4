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
from ._states import check_states, initial_states

__all__ = ["HybridRecurrentCell", "RNNCell", "LSTMCell", "GRUCell", "LSTMPCell", "SequentialRNNCell",
           "HybridSequentialRNNCell", "BidirectionalCell", "DropoutCell", "ModifierCell", "ResidualCell",
           "ZoneoutCell", "VariationalDropoutCell", "dynamic_unroll"]


def _steps(inputs: Any, layout: str) -> list:
    """The per-step ``(N, ...)`` inputs of a sequence array (in ``layout``) or list."""
    if isinstance(inputs, (list, tuple)):
        return list(inputs)
    axis = layout.find("T")
    return [jnp.take(inputs, t, axis=axis) for t in range(inputs.shape[axis])]


def _merged(outputs: list, inputs: Any, layout: str, merge_outputs: bool | None) -> Any:
    """Outputs stacked along the time axis of ``layout`` if ``merge_outputs`` (None: like the inputs)."""
    if merge_outputs is None:
        merge_outputs = not isinstance(inputs, (list, tuple))
    return jnp.stack(outputs, axis=layout.find("T")) if merge_outputs else outputs


def _activate(activation: Any, x):
    """``activation`` (a name of :data:`layer_ops.ACTIVATIONS` or a callable) applied to ``x``."""
    return layer_ops.activation(x, act_type=activation) if isinstance(activation, str) else activation(x)


def check_activation(who: str, arg: str, value: Any) -> Any:
    """``value`` if it names an activation or is callable, else ValueError naming ``who`` and ``arg``."""
    if not callable(value) and not (isinstance(value, str) and value in layer_ops.ACTIVATIONS):
        raise ValueError(f"{who}: {arg} must be one of {sorted(layer_ops.ACTIVATIONS)} or a callable, got {value!r}")
    return value


def _valid_lengths(who: str, valid_length: Any, batch: int, length: int) -> jax.Array:
    """``valid_length`` as an int32 array ``(batch,)``; ShapeError for another shape, ValueError (when the
    values are concrete) for lengths outside ``[0, length]``."""
    lengths = jnp.asarray(valid_length)
    if lengths.shape != (batch,):
        raise ShapeError(f"{who}.unroll: valid_length must have shape ({batch},) (one length per sequence), "
                         f"got {lengths.shape}")
    if not isinstance(lengths, jax.core.Tracer):
        values = np.asarray(lengths)
        if values.size and (values.min() < 0 or values.max() > length):
            raise ValueError(f"{who}.unroll: valid_length must lie in [0, {length}], got {values.tolist()}")
    return lengths.astype(jnp.int32)


def _mask_steps(steps: list, valid_length: jax.Array | None) -> list:
    """Each step ``t``'s ``(N, ...)`` array with the rows of sequences shorter than ``t + 1`` set to zero."""
    if valid_length is None:
        return list(steps)
    masked = []
    for t, step in enumerate(steps):
        keep = (t < valid_length).reshape((-1,) + (1,) * (step.ndim - 1))
        masked.append(jnp.where(keep, step, jnp.zeros((), step.dtype)))
    return masked


def _reverse_steps(steps: list, valid_length: jax.Array | None) -> list:
    """The steps in reverse order; with ``valid_length`` each sequence's first ``valid_length`` steps are
    reversed and its padding stays in place (MXNet's ``SequenceReverse``)."""
    if valid_length is None:
        return list(steps)[::-1]
    t = jnp.arange(len(steps))[:, None]
    index = jnp.where(t < valid_length[None, :], valid_length[None, :] - 1 - t, t)  # (T, N)
    stacked = jnp.stack(steps)
    reversed_ = stacked[index, jnp.arange(stacked.shape[1])[None, :]]
    return [reversed_[i] for i in range(len(steps))]


def _run_steps(step: Callable, steps: list, states: list, valid_length: jax.Array | None) -> tuple[list, list]:
    """``step(x, states) -> (output, states)`` over ``steps``. With ``valid_length``, the outputs past each
    sequence's length are zero and its states stop changing after its last valid step (so the final states
    are those, the begin states for length 0)."""
    states, outputs = list(states), []
    for t, x in enumerate(steps):
        out, new_states = step(x, states)
        if valid_length is not None:
            live = t < valid_length
            new_states = [jnp.where(live.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)
                          for new, old in zip(new_states, states)]
        states = list(new_states)
        outputs.append(out)
    return _mask_steps(outputs, valid_length), states


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

    def _step_rank(self) -> int | None:
        """The rank of one time step's input, ``(N, C)`` -> 2 (None: any rank)."""
        return None

    def unroll(self, length: int, inputs: Any, begin_state: list | None = None, layout: str = "NTC",
               merge_outputs: bool | None = None, valid_length: Any = None) -> tuple[Any, list]:
        """Run the cell over ``length`` time steps (a Python loop over steps, as in Gluon).

        Args:
            inputs: an array ``(N, T, ...)`` (``layout='NTC'``) or ``(T, N, ...)`` (``'TNC'``), or a list of
                ``length`` arrays ``(N, ...)``; ``...`` is one step's features (``C`` for the dense cells).
            begin_state: initial states (default :meth:`begin_state` zeros).
            merge_outputs: stack the outputs into one array along the time axis; None (default) returns
                the same form as ``inputs``.
            valid_length: None, or the length of each sequence, shape ``(N,)``: outputs past a sequence's
                length are zero and its final states are those after its last valid step.
        Returns ``(outputs, final_states)``. Raises ValueError for a bad layout or lengths outside
        ``[0, length]``, ShapeError when the inputs do not hold ``length`` steps of the cell's rank or
        ``valid_length`` is not ``(N,)``.
        """
        name = type(self).__name__
        if layout not in ("NTC", "TNC"):
            raise ValueError(f"{name}.unroll: layout must be 'NTC' or 'TNC', got {layout!r}")
        rank = self._step_rank()
        if isinstance(inputs, (list, tuple)):
            steps = len(inputs)
            if not steps:
                raise ShapeError(f"{name}.unroll: got an empty list of inputs")
            batch = inputs[0].shape[0]
        else:
            ndim = getattr(inputs, "ndim", 0)
            if ndim < 3 or (rank is not None and ndim != rank + 1):
                step = "(N, C)" if rank in (None, 2) else f"rank-{rank} (N, C, ...)"
                expected = "rank 3 or more" if rank is None else f"rank {rank + 1}"
                raise ShapeError(f"{name}.unroll: expected inputs in layout {layout!r} ({expected}) "
                                 f"or a list of {step} arrays, got {getattr(inputs, 'shape', type(inputs).__name__)}")
            steps, batch = inputs.shape[layout.find("T")], inputs.shape[layout.find("N")]
        if steps != length:
            raise ShapeError(f"{name}.unroll: length is {length} but the inputs hold {steps} time steps")
        if valid_length is not None:
            valid_length = _valid_lengths(name, valid_length, batch, length)
        return self._unroll(inputs, begin_state, layout, merge_outputs, valid_length)

    def _begin(self, steps: list, begin_state: list | None) -> list:
        return self.begin_state(steps[0].shape[0], dtype=steps[0].dtype) if begin_state is None \
            else list(begin_state)

    def _unroll(self, inputs: Any, begin_state: list | None, layout: str, merge_outputs: bool | None,
                valid_length: jax.Array | None = None):
        steps = _steps(inputs, layout)
        outputs, states = _run_steps(self, steps, self._begin(steps, begin_state), valid_length)
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

    def _step_rank(self) -> int | None:
        return 2

    @property
    def _output_size(self) -> int:
        """Features of each step's output (the input size of a cell stacked above)."""
        return self._hidden_size

    def _input_size(self, inputs) -> int:
        if inputs.ndim != 2:
            raise ShapeError(f"expected one time step of shape (N, C), got shape {inputs.shape}")
        return inputs.shape[1]

    def _set_activations(self, activation: Any, recurrent_activation: Any) -> None:
        name = type(self).__name__
        for arg, value in (("activation", activation), ("recurrent_activation", recurrent_activation)):
            check_activation(name, arg, value)
        self._activation, self._recurrent_activation = activation, recurrent_activation

    def infer_shape(self, *args, **kwargs) -> None:
        """Sets ``i2h_weight``'s input size from a step's inputs ``(inputs, states)``, or Gluon 2.0's form
        ``infer_shape(i, x, is_bidirect)``: layer ``i`` of a stack whose first input is ``x`` (layers above the
        first take ``hidden_size`` features, twice that if ``is_bidirect``)."""
        if len(args) == 3 and isinstance(args[0], (int, np.integer)) and not isinstance(args[0], bool):
            i, x, is_bidirect = args
            size = x.shape[-1] if i == 0 else self._output_size * (2 if is_bidirect else 1)
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

    def _step(self, x, h, c):
        """One step with the cell's ``activation`` and ``recurrent_activation`` (Gluon's formulas)."""
        i2h = layer_ops.dense(x, self.i2h_weight.data(), self.i2h_bias.data(), flatten=False)
        h2h = layer_ops.dense(h, self.h2h_weight.data(), self.h2h_bias.data(), flatten=False)
        act, gate = (lambda v: _activate(self._activation, v)), (lambda v: _activate(self._recurrent_activation, v))
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


class LSTMPCell(_GatedCell):
    """LSTM cell with a projection (Sak et al., 2014): an :class:`LSTMCell` whose recurrent state is the
    projection ``r = W_hr h`` (``projection_size`` features) of its hidden output ``h``.

    Parameters (Gluon's names): ``i2h_weight (4*hidden_size, input_size)``, ``h2h_weight (4*hidden_size,
    projection_size)``, ``h2r_weight (projection_size, hidden_size)``, ``i2h_bias``/``h2h_bias
    (4*hidden_size,)``. States ``[r (N, projection_size), c (N, hidden_size)]``; ``forward(inputs, states) ->
    (r', [r', c'])`` with gates i, f, g, o of ``W_ih x + b_ih + W_hh r + b_hh``, ``c' = sigmoid(f) * c +
    sigmoid(i) * tanh(g)``, ``r' = W_hr (sigmoid(o) * tanh(c'))``. Raises ValueError for sizes that are not
    positive integers, ShapeError for inputs or states of the wrong shape.
    """

    _mode = "lstm"

    def __init__(self, hidden_size: int, projection_size: int, i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, h2r_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros", input_size: int = 0,
                 dtype: Any = "float32"):
        check_positive_int("LSTMPCell", "projection_size", projection_size)
        super().__init__(hidden_size, i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, input_size, dtype)
        self._projection_size = int(projection_size)
        biases = self.i2h_bias, self.h2h_bias
        del self.i2h_bias, self.h2h_bias  # registered again after h2r_weight: MXNet's order, kept in files
        self.h2h_weight = Parameter("h2h_weight", shape=(4 * hidden_size, projection_size), dtype=dtype,
                                    init=h2h_weight_initializer)
        self.h2r_weight = Parameter("h2r_weight", shape=(projection_size, hidden_size), dtype=dtype,
                                    init=h2r_weight_initializer)
        self.i2h_bias, self.h2h_bias = biases

    @property
    def _output_size(self) -> int:
        return self._projection_size

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return [{"shape": (batch_size, self._projection_size), "__layout__": "NC"},
                {"shape": (batch_size, self._hidden_size), "__layout__": "NC"}]

    def forward(self, inputs, states):
        size, expected = self._input_size(inputs), self.i2h_weight.shape[1]
        if expected and size != expected:
            raise ShapeError(f"expected inputs with {expected} features, got shape {inputs.shape}")
        r, c = check_states(states, self.state_info(inputs.shape[0]))
        x = as_float(inputs, self.h2h_weight.dtype)
        h, c = layer_ops.rnn_cell(x, r, c, self.i2h_weight.data(), self.h2h_weight.data(), self.i2h_bias.data(),
                                  self.h2h_bias.data(), mode="lstm")
        r = layer_ops.dense(h, self.h2r_weight.data(), None, flatten=False)
        return r, [r, c]

    def __repr__(self) -> str:
        return f"LSTMPCell({self.i2h_weight.shape[1] or None} -> {self._hidden_size} -> {self._projection_size})"


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

    def _step_rank(self) -> int | None:
        ranks = [cell._step_rank() for cell in self._children.values()]
        return next((rank for rank in ranks if rank is not None), None)

    def _unroll(self, inputs, begin_state, layout, merge_outputs, valid_length=None):
        if begin_state is None:
            first = inputs[0] if isinstance(inputs, (list, tuple)) else None
            batch = first.shape[0] if first is not None else inputs.shape[layout.find("N")]
            begin_state = self.begin_state(batch, dtype=(first if first is not None else inputs).dtype)
        cells, new_states = list(self._children.values()), []
        for i, (cell, states) in enumerate(zip(cells, self._split_states(begin_state))):
            inputs, states = cell._unroll(inputs, states, layout, merge_outputs if i == len(cells) - 1 else None,
                                          valid_length)
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

    def _step_rank(self) -> int | None:
        return self.l_cell._step_rank()

    def _unroll(self, inputs, begin_state, layout, merge_outputs, valid_length=None):
        steps = _steps(inputs, layout)
        begin_state = self._begin(steps, begin_state)
        split = len(self.l_cell.state_info())
        left, l_states = self.l_cell._unroll(steps, begin_state[:split], layout, False, valid_length)
        right, r_states = self.r_cell._unroll(_reverse_steps(steps, valid_length), begin_state[split:], layout,
                                              False, valid_length)
        right = _reverse_steps(right, valid_length)
        outputs = [jnp.concatenate([lo, ro], axis=-1) for lo, ro in zip(left, right)]
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

    def _step_rank(self) -> int | None:
        return self.base_cell._step_rank()

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

    def _unroll(self, inputs, begin_state, layout, merge_outputs, valid_length=None):
        steps = _steps(inputs, layout)
        outputs, states = self.base_cell._unroll(steps, begin_state, layout, False, valid_length)
        outputs = [o + x for o, x in zip(outputs, _mask_steps(steps, valid_length))]
        return _merged(outputs, inputs, layout, merge_outputs), states


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

    def _unroll(self, inputs, begin_state, layout, merge_outputs, valid_length=None):
        steps = _steps(inputs, layout)
        prev = None

        def step(x, states):
            nonlocal prev
            prev, states = self._step(x, states, prev)
            return prev, states
        outputs, states = _run_steps(step, steps, self._begin(steps, begin_state), valid_length)
        return _merged(outputs, inputs, layout, merge_outputs), states

    def __repr__(self) -> str:
        return f"ZoneoutCell(p_out={self.zoneout_outputs}, p_state={self.zoneout_states}, {self.base_cell!r})"


class VariationalDropoutCell(ModifierCell):
    """Variational dropout (Gal and Ghahramani, 2016) on ``base_cell``: in training mode, one dropout mask per
    sequence (shared by all its time steps) for the inputs (``drop_inputs``), the first state (``drop_states``,
    the ``h`` fed back into the base cell) and the outputs (``drop_outputs``); the three masks are independent.
    In predict mode, or with rates 0, it is the base cell. Masks draw keys from :mod:`hybrid.random`.

    ``unroll`` draws new masks for each sequence. As in Gluon, stepping with ``cell(x, states)`` keeps the
    masks on the cell until :meth:`reset`; stepping a hybridized VariationalDropoutCell in training mode with a
    rate above 0 raises NotImplementedError (use ``unroll``). Raises ValueError for rates outside [0, 1) and
    for ``drop_states`` on a BidirectionalCell (wrap the cells under it instead).
    """

    def __init__(self, base_cell: HybridRecurrentCell, drop_inputs: float = 0., drop_states: float = 0.,
                 drop_outputs: float = 0.):
        if drop_states and isinstance(base_cell, BidirectionalCell):
            raise ValueError("VariationalDropoutCell: drop_states cannot apply to a BidirectionalCell; wrap the "
                             "cells under it in VariationalDropoutCell instead")
        super().__init__(base_cell)
        name = "VariationalDropoutCell"
        self.drop_inputs = check_rate(name, "drop_inputs", drop_inputs)
        self.drop_states = check_rate(name, "drop_states", drop_states)
        self.drop_outputs = check_rate(name, "drop_outputs", drop_outputs)
        self.reset()

    def _runs_compiled(self) -> bool:
        return False  # forward keeps the masks on the cell between steps

    def reset(self) -> None:
        """Forget the masks of the sequence being stepped (the next step draws new ones)."""
        for kind in ("inputs", "states", "outputs"):
            object.__setattr__(self, f"drop_{kind}_mask", None)

    @staticmethod
    def _mask(rate: float, like):
        """An inverted-dropout mask (0 or ``1 / (1 - rate)``) of ``like``'s shape, or None for rate 0."""
        if not rate:
            return None
        return layer_ops.dropout(jnp.ones(like.shape, like.dtype), _random.next_key(), rate=rate)

    def _step(self, inputs, states, masks: dict):
        """One step, drawing the masks missing from ``masks`` (a dict updated in place)."""
        states = list(states)
        if not autograd.is_training():
            return self.base_cell(inputs, states)
        if "inputs" not in masks:
            masks["inputs"] = self._mask(self.drop_inputs, inputs)
        if "states" not in masks:
            masks["states"] = self._mask(self.drop_states, states[0]) if states else None
        if masks["inputs"] is not None:
            inputs = inputs * masks["inputs"]
        if masks["states"] is not None:
            states[0] = states[0] * masks["states"]
        output, states = self.base_cell(inputs, states)
        if "outputs" not in masks:
            masks["outputs"] = self._mask(self.drop_outputs, output)
        if masks["outputs"] is not None:
            output = output * masks["outputs"]
        return output, states

    def forward(self, inputs, states):
        rates = self.drop_inputs or self.drop_states or self.drop_outputs
        if rates and autograd.is_training() and isinstance(inputs, jax.core.Tracer):
            raise NotImplementedError("VariationalDropoutCell: a compiled (hybridized) cell cannot keep its "
                                      "dropout masks between calls in training; use unroll()")
        masks = {kind: getattr(self, f"drop_{kind}_mask") for kind in ("inputs", "states", "outputs")}
        masks = {kind: mask for kind, mask in masks.items() if mask is not None}
        output, states = self._step(inputs, states, masks)
        for kind, mask in masks.items():
            object.__setattr__(self, f"drop_{kind}_mask", mask)
        return output, states

    def _unroll(self, inputs, begin_state, layout, merge_outputs, valid_length=None):
        steps = _steps(inputs, layout)
        begin_state = self._begin(steps, begin_state)
        training = autograd.is_training()
        if self.drop_states and training:  # step by step: the state mask applies to each step's fed-back h
            masks: dict = {}
            outputs, states = _run_steps(lambda x, s: self._step(x, s, masks), steps, begin_state, valid_length)
        else:  # the base cell unrolls the masked sequence (so it may be bidirectional)
            mask = self._mask(self.drop_inputs, steps[0]) if training else None
            if mask is not None:
                steps = [x * mask for x in steps]
            outputs, states = self.base_cell._unroll(steps, begin_state, layout, False, valid_length)
            mask = self._mask(self.drop_outputs, outputs[0]) if training else None
            if mask is not None:
                outputs = [o * mask for o in outputs]
        return _merged(outputs, inputs, layout, merge_outputs), states

    def __repr__(self) -> str:
        return (f"VariationalDropoutCell(p_in={self.drop_inputs}, p_state={self.drop_states}, "
                f"p_out={self.drop_outputs}, {self.base_cell!r})")


def dynamic_unroll(cell: HybridRecurrentCell, inputs: Any, begin_state: list, drop_inputs: float = 0,
                   drop_outputs: float = 0, layout: str = "TNC", valid_length: Any = None) -> tuple[Any, list]:
    """Gluon's ``rnn_cell.dynamic_unroll``: ``cell`` over the sequence ``inputs`` (``(T, N, ...)`` for
    ``layout='TNC'``, ``(N, T, ...)`` for ``'NTC'``) from ``begin_state``; returns ``(outputs, states)`` with
    the outputs merged in ``layout``. In training mode ``drop_inputs``/``drop_outputs`` drop the inputs and
    outputs with one mask per sequence (shared over time). ``valid_length (N,)``: outputs past each sequence's
    length are zero and the states are those after its last valid step.

    Unlike Gluon (a ``foreach`` operator), the loop is unrolled in Python like :meth:`unroll`; hybridized, the
    steps are traced into one program. Raises what :meth:`HybridRecurrentCell.unroll` raises, and ValueError
    for rates outside [0, 1).
    """
    for arg, rate in (("drop_inputs", drop_inputs), ("drop_outputs", drop_outputs)):
        check_rate("dynamic_unroll", arg, rate)
    if layout not in ("NTC", "TNC"):
        raise ValueError(f"dynamic_unroll: layout must be 'NTC' or 'TNC', got {layout!r}")
    axis = layout.find("T")
    if drop_inputs and autograd.is_training():
        inputs = layer_ops.dropout(inputs, _random.next_key(), rate=drop_inputs, axes=(axis,))
    outputs, states = cell.unroll(inputs.shape[axis], inputs, begin_state, layout=layout, merge_outputs=True,
                                  valid_length=valid_length)
    if drop_outputs and autograd.is_training():  # padded outputs are zero and stay zero
        outputs = layer_ops.dropout(outputs, _random.next_key(), rate=drop_outputs, axes=(axis,))
    return outputs, states
