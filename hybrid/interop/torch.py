"""PyTorch weights in hybrid networks.

:func:`load_torch_state_dict` writes a PyTorch ``state_dict`` into a network's parameters,
:func:`torch_state_dict` goes the other way, and :func:`load_torchvision` loads torchvision's ResNet, VGG
and MobileNetV2 into the model zoo's networks (:func:`torchvision_net` builds the matching network).

A PyTorch name is resolved in two steps. ``mapping`` (when given) renames it; then its dotted path is
followed through the network's children, and its last part is translated by the layer reached there:

=============================================  ============================================================
PyTorch module                                 hybrid block: PyTorch name -> hybrid parameter
=============================================  ============================================================
Linear, Embedding                              Dense, Embedding: ``weight``, ``bias`` (same layouts)
Conv1d/2d/3d, ConvTranspose1d/2d/3d            Conv1D/2D/3D(Transpose): ``weight`` (same layouts for NCHW-like
                                               layouts; moved to channels-last for NHWC-like), ``bias``
BatchNorm1d/2d/3d                              BatchNorm: ``weight`` -> ``gamma``, ``bias`` -> ``beta``,
                                               ``running_mean``, ``running_var``; ``num_batches_tracked``
                                               is skipped
LayerNorm, GroupNorm, InstanceNorm (affine)    LayerNorm, GroupNorm, InstanceNorm: ``weight`` -> ``gamma``,
                                               ``bias`` -> ``beta``
PReLU                                          PReLU: ``weight`` -> ``alpha``
RNN, LSTM, GRU                                 rnn.RNN, rnn.LSTM, rnn.GRU: ``weight_ih_l{k}`` ->
                                               ``l{k}_i2h_weight``, ``weight_hh_l{k}`` -> ``l{k}_h2h_weight``,
                                               ``bias_ih_l{k}``, ``bias_hh_l{k}``, ``weight_hr_l{k}`` ->
                                               ``l{k}_h2r_weight``; ``..._reverse`` -> ``r{k}_...`` (gate
                                               orders i, f, g, o and r, z, n are the same)
RNNCell, LSTMCell, GRUCell                     rnn cells: ``weight_ih`` -> ``i2h_weight``, ``weight_hh`` ->
                                               ``h2h_weight``, ``bias_ih``, ``bias_hh``
MultiheadAttention                             MultiHeadAttention: ``in_proj_weight``/``in_proj_bias`` split
                                               into thirds for ``query_proj``, ``key_proj``, ``value_proj``;
                                               ``q_proj_weight``, ``k_proj_weight``, ``v_proj_weight``;
                                               ``out_proj.*`` as Linear
TransformerEncoderLayer                        TransformerEncoderLayer: children ``self_attn``, ``linear1``,
                                               ``linear2``, ``norm1``, ``norm2`` are ``attention``,
                                               ``ffn_1``, ``ffn_2``, ``attention_norm``, ``ffn_norm``
=============================================  ============================================================

A name that no rule translates may name a hybrid parameter directly (``features.1.gamma``). torch is an
optional dependency (``pip install 'hybrid[torch]'``), imported only by the functions that need it.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Union

import jax.numpy as jnp
import numpy as np

from .. import nn, rnn
from ..block import Block, HybridBlock
from ..errors import ShapeError
from ..nn.conv_layers import _Conv
from ..parameter import Constant, Parameter
from . import _torchvision
from ._torchvision import TorchvisionBottleneck, torchvision_mapping, torchvision_net

__all__ = ["load_torch_state_dict", "torch_state_dict", "load_torchvision", "torchvision_mapping",
           "torchvision_net", "TorchvisionBottleneck", "TORCHVISION_ARCHS"]

TORCHVISION_ARCHS = _torchvision.ARCHS
NameMapping = Union[Mapping[str, Union[str, None]], Callable[[str], Union[str, None]], None]


@dataclass(frozen=True)
class _Piece:
    """The part of one PyTorch entry that one hybrid parameter holds: ``attr`` names the parameter from the
    block (``'gamma'``, or ``'query_proj.weight'`` in a child), ``rows`` the slice of the entry's first axis
    (None: all of it), ``channels_last`` whether the entry's axis 1 moves to the end."""
    attr: str
    rows: tuple[int, int] | None = None
    channels_last: bool = False


_SKIP = None  # an entry PyTorch has and hybrid does not need (BatchNorm's num_batches_tracked)
_RNN_KINDS = (("weight_ih", "i2h_weight"), ("weight_hh", "h2h_weight"), ("bias_ih", "i2h_bias"),
              ("bias_hh", "h2h_bias"), ("weight_hr", "h2r_weight"))
_CHILD_ALIASES: dict[type, dict[str, str]] = {
    nn.TransformerEncoderLayer: {"self_attn": "attention", "linear1": "ffn_1", "linear2": "ffn_2",
                                 "norm1": "attention_norm", "norm2": "ffn_norm"}}


def _torch_entries(block: Block) -> dict[str, list[_Piece] | None]:
    """The PyTorch names of ``block``'s parameters (relative to the block), each with the pieces it fills."""
    if isinstance(block, nn.BatchNorm):
        return {"weight": [_Piece("gamma")], "bias": [_Piece("beta")], "running_mean": [_Piece("running_mean")],
                "running_var": [_Piece("running_var")], "num_batches_tracked": _SKIP}
    if isinstance(block, (nn.LayerNorm, nn.GroupNorm, nn.InstanceNorm)):
        return {"weight": [_Piece("gamma")], "bias": [_Piece("beta")]}
    if isinstance(block, _Conv):
        entries = {"weight": [_Piece("weight", channels_last=block._layout.index("C") != 1)]}
        return {**entries, "bias": [_Piece("bias")]} if block.bias is not None else entries
    if isinstance(block, nn.PReLU):
        return {"weight": [_Piece("alpha")]}
    if isinstance(block, (rnn.RNN, rnn.LSTM, rnn.GRU)):
        entries = {}
        for layer in range(block._num_layers):
            for direction in block._directions:
                suffix = "_reverse" if direction == "r" else ""
                for torch_kind, kind in _RNN_KINDS:
                    if f"{direction}{layer}_{kind}" in block._reg_params:
                        entries[f"{torch_kind}_l{layer}{suffix}"] = [_Piece(f"{direction}{layer}_{kind}")]
        return entries
    if isinstance(block, (rnn.RNNCell, rnn.LSTMCell, rnn.GRUCell, rnn.LSTMPCell)):
        return {torch_kind: [_Piece(kind)] for torch_kind, kind in _RNN_KINDS if kind in block._reg_params}
    if isinstance(block, nn.MultiHeadAttention):
        units, projections = block._units, ("query_proj", "key_proj", "value_proj")
        thirds = [(i * units, (i + 1) * units) for i in range(3)]
        entries = {"in_proj_weight": [_Piece(f"{p}.weight", rows) for p, rows in zip(projections, thirds)]}
        entries.update({f"{p[0]}_proj_weight": [_Piece(f"{p}.weight")] for p in projections})
        if block.query_proj.bias is not None:
            entries["in_proj_bias"] = [_Piece(f"{p}.bias", rows) for p, rows in zip(projections, thirds)]
        return entries
    return {}  # Dense, Embedding and the rest: PyTorch's names are hybrid's


def _unpacked_names(block: Block) -> tuple[str, ...]:
    """The names of ``block``'s entries that PyTorch would not write: a MultiheadAttention stores
    ``in_proj_weight`` when key and value have the model's size, else ``q_proj_weight``... (both are read)."""
    if not isinstance(block, nn.MultiHeadAttention):
        return ()
    units = block._units
    packed = all(getattr(block, p).weight.shape[1] == units for p in ("query_proj", "key_proj", "value_proj"))
    return ("q_proj_weight", "k_proj_weight", "v_proj_weight") if packed else ("in_proj_weight",)


def _child(block: Block, name: str) -> tuple[str, Block] | None:
    """``block``'s child called ``name``, or whose PyTorch name is ``name``: (hybrid name, child)."""
    child = block._children.get(name)
    if child is not None:
        return name, child
    alias = _CHILD_ALIASES.get(type(block), {}).get(name)
    return (alias, block._children[alias]) if alias in block._children else None


def _resolve(net: Block, name: str) -> tuple[Block, str, str]:
    """Follow ``name`` through the children of ``net``: (block reached, its hybrid path, rest of the name)."""
    parts, block, path = name.split("."), net, []
    for i, part in enumerate(parts[:-1]):
        found = _child(block, part)
        if found is None:
            return block, ".".join(path), ".".join(parts[i:])
        path.append(found[0])
        block = found[1]
    return block, ".".join(path), parts[-1]


def _parameter(block: Block, attr: str) -> Parameter:
    *children, name = attr.split(".")
    for child in children:
        block = block._children[child]
    return block._reg_params[name]


def _torch_shape(piece: _Piece, shape: tuple) -> tuple:
    """The PyTorch layout of a hybrid parameter shape (channels-last moved back to axis 1)."""
    return (shape[0], shape[-1]) + tuple(shape[1:-1]) if piece.channels_last else tuple(shape)


def _fits(expected: tuple, got: tuple) -> bool:
    return len(expected) == len(got) and all(e in (0, g) for e, g in zip(expected, got))


def _describe(block: Block, path: str) -> str:
    where = f"'{path}'" if path else "the network itself"
    names = sorted(set(block._children) | set(block._reg_params) | set(_torch_entries(block) or ()))
    return f"{where} ({type(block).__name__}, which has {', '.join(names) if names else 'nothing inside'})"


def _shape_of(value: Any) -> tuple:
    shape = getattr(value, "shape", None)
    return tuple(int(d) for d in (shape if shape is not None else np.shape(value)))


def _at_most(count: int, lines: list[str]) -> list[str]:
    return lines if len(lines) <= count else lines[:count] + [f"... and {len(lines) - count} more"]


def _rename(mapping: NameMapping, name: str) -> str | None:
    if mapping is None:
        return name
    if callable(mapping) and not isinstance(mapping, Mapping):
        return mapping(name)
    return mapping.get(name, name)


def _plan(net: Block, state_dict: Mapping[str, Any], mapping: NameMapping, strict: bool) -> tuple[list, dict]:
    """Check every name and shape; return ``[(parameter, torch name, piece)]`` and ``{hybrid name: torch
    name}``. Raises ShapeError / ValueError (nothing has been read or written yet)."""
    names = {}
    for hybrid_name, param in net.collect_params().items():
        names.setdefault(id(param), hybrid_name)
    plan, claimed, unexpected, mismatched = [], {}, [], []
    for torch_name, value in state_dict.items():
        renamed = _rename(mapping, torch_name)
        if renamed is None:
            continue
        block, path, leaf = _resolve(net, renamed)
        entries = _torch_entries(block)
        if leaf in entries:
            pieces = entries[leaf]
            if pieces is _SKIP:
                continue
        elif leaf in block._reg_params:
            pieces = [_Piece(leaf)]
        else:
            shown = torch_name if renamed == torch_name else f"{torch_name} (renamed {renamed})"
            unexpected.append(f"'{shown}' {_shape_of(value)}: no parameter '{leaf}' in {_describe(block, path)}")
            continue
        params = [_parameter(block, piece.attr) for piece in pieces]
        expected = [_torch_shape(piece, p.shape) for piece, p in zip(pieces, params) if p.shape is not None]
        if pieces[0].rows is not None and len(expected) == len(pieces):
            expected = [(sum(e[0] for e in expected),) + expected[0][1:]]
        got = _shape_of(value)
        targets = ", ".join(f"'{names.get(id(p), p.name)}' {p.shape}" for p in params)
        if not all(_fits(e, got) for e in expected):
            mismatched.append(f"PyTorch '{torch_name}' has shape {got}; hybrid parameter(s) {targets} need "
                              f"{expected[0]} in PyTorch's layout")
            continue
        for piece, param in zip(pieces, params):
            if id(param) in claimed:
                raise ValueError(f"load_torch_state_dict: PyTorch entries '{claimed[id(param)]}' and '{torch_name}' "
                                 f"both map onto hybrid parameter '{names.get(id(param), param.name)}'")
            claimed[id(param)] = torch_name
            plan.append((param, torch_name, piece))
    if mismatched:
        raise ShapeError("load_torch_state_dict: shapes differ:\n  " + "\n  ".join(_at_most(10, mismatched)))
    expected_names = {id(p): name for name, _, params in _torch_layout(net) for p in params}
    missing = [f"'{name}' {p.shape} gets no value (no entry is named or mapped to '{expected_names[id(p)]}')"
               for name, p in net.collect_params().items()
               if id(p) not in claimed and not isinstance(p, Constant) and names[id(p)] == name]
    if strict and (unexpected or missing):
        lines = _at_most(10, [f"PyTorch entry {u}" for u in unexpected])
        lines += _at_most(10, [f"hybrid parameter {m}" for m in missing])
        raise ValueError(f"load_torch_state_dict: the state_dict does not match {type(net).__name__}:\n  "
                         + "\n  ".join(lines) + "\nRename entries with mapping=, or pass strict=False to skip "
                         "unmatched entries and keep unmatched parameters as they are.")
    loaded = {}
    for param, torch_name, piece in plan:
        rows = f"[{piece.rows[0]}:{piece.rows[1]}]" if piece.rows is not None else ""
        loaded[names.get(id(param), param.name)] = torch_name + rows
    return plan, loaded


def _to_numpy(name: str, value: Any) -> np.ndarray:
    """``value`` (a torch.Tensor or anything ``np.asarray`` takes) as a NumPy array of numbers."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        import torch
        if value.device.type == "meta":
            raise TypeError(f"load_torch_state_dict: PyTorch entry '{name}' is a meta tensor (a shape without "
                            "values); use dry_run=True to check such a state_dict")
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:
            value = value.float()
        value = value.numpy()
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"load_torch_state_dict: PyTorch entry '{name}' has dtype {array.dtype}, not a number type")
    return array


def _entries_of(source: Any) -> Mapping[str, Any]:
    state_dict = source.state_dict() if callable(getattr(source, "state_dict", None)) else source
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"expected a PyTorch state_dict (a mapping of names to tensors) or a torch.nn.Module, "
                        f"got {type(source).__name__}")
    return state_dict


def load_torch_state_dict(net: Block, state_dict: Any, mapping: NameMapping = None, strict: bool = True,
                          dry_run: bool = False) -> dict[str, str]:
    """Write a PyTorch ``state_dict`` into ``net``'s parameters; nothing changes unless every check passes.

    Args:
        net: the hybrid network (initialised or not; unknown shapes are filled in).
        state_dict: ``{name: torch.Tensor or NumPy array}``, or a ``torch.nn.Module`` (its ``state_dict()``).
        mapping: renames PyTorch names before they are resolved: a dict (names it lacks stay as they are) or
            a function of the name; None from either skips the entry. The result may be PyTorch-style at a
            hybrid path (``'features.1.weight'`` for a BatchNorm at ``features.1``) or a hybrid parameter's
            name (``'features.1.gamma'``).
        strict: refuse entries that match no parameter and parameters that get no value; with False both are
            skipped (shapes are still checked).
        dry_run: check names and shapes only and write nothing (the values may be meta tensors).
    Values are cast to each parameter's dtype.

    Returns ``{hybrid parameter name: PyTorch name}`` of what was (or would be) loaded. Raises ShapeError
    naming the PyTorch entry, the hybrid parameter and both shapes; ValueError for unmatched names (with
    ``strict``) or two entries for one parameter; TypeError for values that are not numbers.
    """
    if not isinstance(net, Block):
        raise TypeError(f"load_torch_state_dict: net must be a hybrid Block, got {type(net).__name__}")
    entries = _entries_of(state_dict)
    plan, loaded = _plan(net, entries, mapping, strict)
    if dry_run:
        return loaded
    arrays = {name: _to_numpy(name, entries[name]) for name in dict.fromkeys(n for _, n, _ in plan)}
    values = []
    for param, torch_name, piece in plan:
        array = arrays[torch_name]
        if piece.rows is not None:
            array = array[piece.rows[0]:piece.rows[1]]
        if piece.channels_last:
            array = np.moveaxis(array, 1, -1)
        values.append(jnp.asarray(array, dtype=param.dtype))
    for (param, _, _), value in zip(plan, values):  # every value is ready: the writes cannot fail halfway
        param.set_data(value)
    return loaded


def _torch_layout(net: Block) -> Iterator[tuple[str, list[_Piece] | None, list[Parameter]]]:
    """``(PyTorch name, pieces, parameters)`` of every entry PyTorch would store for ``net``, in PyTorch's
    order (a block's own entries, then its children's); pieces None for an entry with no hybrid value."""
    done: set[int] = set()

    def visit(block: Block, prefix: str) -> Iterator:
        for leaf, pieces in _torch_entries(block).items():
            if pieces is _SKIP:
                yield prefix + leaf, None, []
                continue
            params = [_parameter(block, piece.attr) for piece in pieces]
            if not any(id(p) in done for p in params) and leaf not in _unpacked_names(block):
                done.update(id(p) for p in params)
                yield prefix + leaf, pieces, params
        for name, param in block._reg_params.items():
            if id(param) not in done:
                done.add(id(param))
                yield prefix + name, [_Piece(name)], [param]
        aliases = {v: k for k, v in _CHILD_ALIASES.get(type(block), {}).items()}
        for name, child in block._children.items():
            yield from visit(child, f"{prefix}{aliases.get(name, name)}.")

    return visit(net, "")


def torch_state_dict(net: Block) -> "OrderedDict[str, Any]":
    """``net``'s parameters as a PyTorch ``state_dict`` (``{name: torch.Tensor}``), named and laid out as
    :func:`load_torch_state_dict` reads them, so that a PyTorch module of the same structure (same child
    names) loads it with ``load_state_dict``. BatchNorm layers get ``num_batches_tracked = 0``.

    Raises UninitializedParameterError / DeferredInitializationError for a parameter without data.
    """
    import torch
    out: OrderedDict[str, Any] = OrderedDict()
    for name, pieces, params in _torch_layout(net):
        if pieces is None:
            out[name] = torch.tensor(0, dtype=torch.long)
            continue
        arrays = [np.asarray(p.data()) for p in params]
        arrays = [np.moveaxis(a, -1, 1) if piece.channels_last else a for piece, a in zip(pieces, arrays)]
        out[name] = torch.from_numpy(np.concatenate(arrays) if len(arrays) > 1 else arrays[0].copy())
    return out


def load_torchvision(net: HybridBlock, model_or_state_dict: Any, arch: str, dry_run: bool = False) -> dict[str, str]:
    """Load a torchvision model's weights (a ``torchvision.models`` module or its ``state_dict``) into the
    model-zoo network ``net`` built for ``arch`` (one of :data:`TORCHVISION_ARCHS`: ``resnet18`` ... ``resnet152``,
    ``vgg11`` ... ``vgg19_bn``, ``mobilenet_v2``), e.g. ``model_zoo.resnet18_v1()`` or
    ``torchvision_net(arch)``. In predict mode the two then compute the same function.

    The output layer may have any number of classes as long as both sides agree. Raises ValueError for an
    unknown ``arch`` or a network of another structure (the zoo's ``resnet50_v1`` strides the first 1x1
    convolution of a bottleneck, torchvision the 3x3 one: build it with ``torchvision_net('resnet50')``),
    and the errors of :func:`load_torch_state_dict`.
    """
    mapping = torchvision_mapping(arch)
    _torchvision.check_structure(net, arch)
    return load_torch_state_dict(net, model_or_state_dict, mapping=mapping, strict=True, dry_run=dry_run)
