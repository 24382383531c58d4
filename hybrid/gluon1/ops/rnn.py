"""MXNet's fused ``RNN`` operator: multi-layer, optionally bidirectional RNN (relu/tanh), LSTM (with an
optional projection) and GRU over a ``(T, N, C)`` sequence, its weights in one flat vector."""
from __future__ import annotations

import math

import jax.numpy as jnp

from ... import random as _random
from ...graph import layer_ops
from ._registry import Attrs, OpContext, register

__all__ = ["rnn", "unpack_rnn_params"]

_MODES = ("rnn_relu", "rnn_tanh", "lstm", "gru")


def _rnn_outputs(a: Attrs) -> int:
    if not a.bool("state_outputs", False):
        return 1
    return 3 if a.str("mode", "lstm", _MODES) == "lstm" else 2


def unpack_rnn_params(flat, mode: str, input_size: int, hidden: int, layers: int, directions: int,
                      projection: int | None = None) -> list[list[dict]]:
    """Split MXNet's flat RNN parameter vector into ``[layer][direction] -> {i2h_weight, h2h_weight,
    i2h_bias, h2h_bias[, h2r_weight]}``. The vector holds every weight first (layer by layer, direction by
    direction: ``i2h``, ``h2h``, then ``h2r`` with a projection), then every bias in the same order (no
    ``h2r`` bias); weights are row-major ``(G*hidden, in)``, ``(G*hidden, P or hidden)``, ``(P, hidden)``.
    Raises ValueError when the vector's length is not the one these sizes need."""
    rows = layer_ops.RNN_GATES[mode] * hidden
    out_size = projection or hidden
    shapes = []
    in_size = input_size
    for _ in range(layers):
        kinds = [("i2h_weight", (rows, in_size)), ("h2h_weight", (rows, out_size))]
        if projection:
            kinds.append(("h2r_weight", (projection, hidden)))
        shapes.append(kinds)
        in_size = out_size * directions
    need = sum(math.prod(s) for kinds in shapes for _, s in kinds) * directions + 2 * rows * layers * directions
    if flat.shape != (need,):
        raise ValueError(f"RNN: the parameter vector has shape {tuple(flat.shape)}, mode={mode} with "
                         f"input size {input_size}, state_size={hidden}, num_layers={layers}, "
                         f"{directions} direction(s) needs ({need},)")
    params = [[{} for _ in range(directions)] for _ in range(layers)]
    offset = 0
    for layer, kinds in enumerate(shapes):
        for d in range(directions):
            for name, shape in kinds:
                size = math.prod(shape)
                params[layer][d][name] = flat[offset:offset + size].reshape(shape)
                offset += size
    for layer in range(layers):
        for d in range(directions):
            for name in ("i2h_bias", "h2h_bias"):
                params[layer][d][name] = flat[offset:offset + rows]
                offset += rows
    return params


def _initial(state, layers: int, batch: int, size: int, dtype):
    """A begin state; MXNet's ``zeros`` of an unknown (0) batch size stands for zeros of the data's batch."""
    if state is None or 0 in state.shape:
        return jnp.zeros((layers, batch, size), dtype)
    return state


@register("RNN", inputs=("data", "parameters", "state", "state_cell?", "sequence_length?"),
          num_outputs=_rnn_outputs, needs_ctx=True)
def rnn(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``data (T, N, C)`` -> ``out (T, N, D*P)`` and, with ``state_outputs``, the final ``h (L*D, N, P)``
    (and LSTM's ``c (L*D, N, H)``); P is ``projection_size`` (LSTM only) or ``state_size``. States are ordered
    layer by layer, forward direction first. Dropout ``p`` between layers applies in training mode."""
    mode = a.str("mode", None, _MODES)
    if mode is None:
        raise a.fail("missing attribute 'mode'")
    hidden, layers = a.int("state_size"), a.int("num_layers", 1)
    directions = 2 if a.bool("bidirectional", False) else 1
    projection = a.opt_int("projection_size")
    if projection and mode != "lstm":
        raise a.fail("projection_size is only supported with mode='lstm'")
    if a.bool("use_sequence_length", False):
        raise a.fail("use_sequence_length=True is not supported (mask the outputs instead)")
    if any(a.has(k) for k in ("lstm_state_clip_min", "lstm_state_clip_max")):
        raise a.fail("lstm_state_clip_min/max are not supported")
    rate = a.float("p", 0.0)
    x, flat = ins[0], ins[1]
    if x.ndim != 3:
        raise a.fail(f"expected data of shape (T, N, C), got {tuple(x.shape)}")
    batch, out_size = x.shape[1], projection or hidden
    params = unpack_rnn_params(flat.astype(x.dtype), mode, x.shape[2], hidden, layers, directions, projection)
    h0 = _initial(ins[2], layers * directions, batch, out_size, x.dtype)
    c0 = _initial(ins[3], layers * directions, batch, hidden, x.dtype) if mode == "lstm" else None
    new_h, new_c = [], []
    for layer in range(layers):
        outputs = []
        for d in range(directions):
            p, index = params[layer][d], layer * directions + d
            if projection:
                y, h, c = layer_ops.projected_lstm_layer(x, h0[index], c0[index], p["i2h_weight"], p["h2h_weight"],
                                                         p["i2h_bias"], p["h2h_bias"], p["h2r_weight"],
                                                         reverse=d == 1)
            else:
                y, h, c = layer_ops.rnn_layer(x, h0[index], None if c0 is None else c0[index], p["i2h_weight"],
                                              p["h2h_weight"], p["i2h_bias"], p["h2h_bias"], mode=mode,
                                              reverse=d == 1)
            outputs.append(y)
            new_h.append(h)
            new_c.append(c)
        x = outputs[0] if directions == 1 else jnp.concatenate(outputs, axis=-1)
        if rate and ctx.training and layer < layers - 1:
            x = layer_ops.dropout(x, _random.next_key(), rate=rate)
    if not a.bool("state_outputs", False):
        return [x]
    return [x, jnp.stack(new_h)] + ([jnp.stack(new_c)] if mode == "lstm" else [])
