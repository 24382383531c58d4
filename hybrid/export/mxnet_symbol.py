"""Run an MXNet ``-symbol.json`` graph with hybrid's layer operations.

The MXNet nodes are validated once (structure, references, operator names,
attribute syntax) and then interpreted by plain JAX code that calls hybrid's big
ops, so a hybridized import traces to the same ``dense``/``convolution``/... nodes
as a native network, works for any batch size, and can be exported again in
hybrid's format.  Supported operators are the keys of ``CONVERTERS``; anything
else is rejected at import, naming the operators.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .. import autograd
from .. import random as _random
from ..graph import layer_ops
from .errors import FormatError
from .params_file import load_parameter_file
from .symbol_json import ParamSpec

__all__ = ["CONVERTERS", "MXNetProgram", "import_mxnet"]

_INT = re.compile(r"^-?\d{1,18}$")
_TUPLE = re.compile(r"^[\(\[]\s*(-?\d{1,18}\s*(,\s*-?\d{1,18}\s*)*)?,?\s*[\)\]]$")
_BOOLS = {"true": True, "1": True, "false": False, "0": False}


# -- attributes ------------------------------------------------------------------------------------
class Attrs:
    """String attributes of one MXNet node with typed, validating getters."""

    def __init__(self, raw: dict[str, str], where: str):
        self.raw, self.where = raw, where

    def _get(self, key: str) -> str | None:
        value = self.raw.get(key)
        return None if value in (None, "None") else value

    def int(self, key: str, default: int | None = None) -> int:
        value = self._get(key)
        if value is None:
            if default is None:
                raise FormatError(f"{self.where}: missing attribute {key!r}")
            return default
        if not _INT.match(value.strip()):
            raise FormatError(f"{self.where}: attribute {key}={value!r:.40} is not an integer")
        return int(value)

    def float(self, key: str, default: float) -> float:
        value = self._get(key)
        if value is None:
            return default
        try:
            result = float(value)
        except ValueError:
            raise FormatError(f"{self.where}: attribute {key}={value!r:.40} is not a number") from None
        if not math.isfinite(result):
            raise FormatError(f"{self.where}: attribute {key}={value!r:.40} must be finite")
        return result

    def bool(self, key: str, default: bool) -> bool:
        value = self._get(key)
        if value is None:
            return default
        if value.strip().lower() not in _BOOLS:
            raise FormatError(f"{self.where}: attribute {key}={value!r:.40} is not a boolean")
        return _BOOLS[value.strip().lower()]

    def str(self, key: str, default: str | None, choices: Sequence[str] | None = None) -> str | None:
        value = self._get(key)
        if value is None:
            return default
        if choices is not None and value not in choices:
            raise FormatError(f"{self.where}: attribute {key}={value!r:.40}; supported: {list(choices)}")
        return value

    def tuple(self, key: str, default: tuple | None = None) -> tuple[int, ...]:
        value = self._get(key)
        if value is None:
            if default is None:
                raise FormatError(f"{self.where}: missing attribute {key!r}")
            return default
        text = value.strip()
        if _INT.match(text):
            return (int(text),)
        if not _TUPLE.match(text) or len(text) > 400:
            raise FormatError(f"{self.where}: attribute {key}={value!r:.40} is not a tuple of integers")
        return tuple(int(v) for v in re.findall(r"-?\d+", text))


# -- operators -------------------------------------------------------------------------------------
@dataclass
class Context:
    """What a converter may use besides its inputs: mode, randomness, state write-back."""

    training: bool
    set_state: Callable[[int, Any], None]  # input position -> new value of that input's parameter


def _spatial(attrs: Attrs, key: str, n: int, default: int) -> tuple[int, ...]:
    value = attrs.tuple(key, ())
    value = value or (default,) * n
    if len(value) != n:
        raise FormatError(f"{attrs.where}: attribute {key}={value} must have {n} entries (one per spatial axis "
                          f"of the {n}-d kernel), got {len(value)}")
    lowest = 1 if default else 0
    if any(v < lowest for v in value):
        raise FormatError(f"{attrs.where}: attribute {key}={value} must hold integers >= {lowest}")
    return value


def _positive_int(attrs: Attrs, key: str, default: int) -> int:
    value = attrs.int(key, default)
    if value < 1:
        raise FormatError(f"{attrs.where}: attribute {key}={value} must be a positive integer")
    return value


def _layout(attrs: Attrs, n: int) -> str:
    default = {1: "NCW", 2: "NCHW", 3: "NCDHW"}[n]
    return attrs.str("layout", default, (default, {1: "NWC", 2: "NHWC", 3: "NDHWC"}[n]))


def _fully_connected(ins, a: Attrs, ctx):
    no_bias = a.bool("no_bias", False)
    x, weight = ins[0], ins[1]
    if weight.shape[0] != a.int("num_hidden"):
        raise FormatError(f"{a.where}: weight shape {weight.shape} does not match num_hidden={a.int('num_hidden')}")
    return [layer_ops.dense(x, weight, None if no_bias else ins[2], flatten=a.bool("flatten", True))]


def _convolution(ins, a: Attrs, ctx):
    kernel = a.tuple("kernel")
    if not 1 <= len(kernel) <= 3:
        raise FormatError(f"{a.where}: kernel {kernel} must have 1 to 3 dimensions")
    n = len(kernel)
    weight = ins[1]
    if weight.shape[0] != a.int("num_filter"):
        raise FormatError(f"{a.where}: weight shape {weight.shape} does not match num_filter={a.int('num_filter')}")
    return [layer_ops.convolution(ins[0], weight, None if a.bool("no_bias", False) else ins[2],
                                  strides=_spatial(a, "stride", n, 1), padding=_spatial(a, "pad", n, 0),
                                  dilation=_spatial(a, "dilate", n, 1), groups=_positive_int(a, "num_group", 1),
                                  layout=_layout(a, n))]


def _group_norm(ins, a: Attrs, ctx):
    """MXNet's GroupNorm: 1.x files hold one gamma and beta per group (broadcast to the group's channels),
    2.x files one per channel."""
    x, gamma, beta = ins
    if a.bool("output_mean_var", False):
        raise FormatError(f"{a.where}: output_mean_var=True is not supported")
    groups = _positive_int(a, "num_groups", 1)
    channels = x.shape[1]
    if channels % groups:
        raise FormatError(f"{a.where}: {channels} channels cannot form num_groups={groups} equal groups")
    if gamma.shape != beta.shape or gamma.shape[0] not in (groups, channels):
        raise FormatError(f"{a.where}: gamma {gamma.shape} and beta {beta.shape} must both have num_groups={groups} "
                          f"(MXNet 1.x) or {channels} channels (2.x) entries")
    if gamma.shape[0] != channels:
        gamma, beta = jnp.repeat(gamma, channels // groups), jnp.repeat(beta, channels // groups)
    return [layer_ops.group_norm(x, gamma, beta, num_groups=groups, axis=1, eps=a.float("eps", 1e-5))]


def _batch_norm(ins, a: Attrs, ctx):
    x, gamma, beta, mean, var = ins
    if a.bool("output_mean_var", False):
        raise FormatError(f"{a.where}: output_mean_var=True is not supported")
    if a.bool("fix_gamma", True):
        gamma = jnp.ones_like(gamma)
    training = ctx.training and not a.bool("use_global_stats", False)
    axis = a.int("axis", 1) % x.ndim
    out = layer_ops.batch_norm(x, gamma, beta, mean, var, axis=axis, eps=a.float("eps", 1e-3),
                               momentum=a.float("momentum", 0.9), training=training)
    if not training:
        return [out]
    ctx.set_state(3, out[1])
    ctx.set_state(4, out[2])
    return [out[0]]


_ACT = ("relu", "sigmoid", "tanh", "softrelu", "softsign")


def _activation(ins, a: Attrs, ctx):
    return [layer_ops.activation(ins[0], act_type=a.str("act_type", None, _ACT) or "relu")]


def _leaky_relu(ins, a: Attrs, ctx):
    kind = a.str("act_type", "leaky", ("leaky", "prelu", "elu", "selu", "gelu", "rrelu"))
    x = ins[0]
    if kind == "gelu":
        return [layer_ops.activation(x, act_type="gelu")]
    if kind == "selu":
        return [layer_ops.activation(x, act_type="selu")]
    if kind == "elu":
        return [jnp.where(x > 0, x, a.float("slope", 0.25) * jnp.expm1(x))]
    if kind == "prelu":
        shape = [1] * x.ndim
        if x.ndim > 1:
            shape[1] = -1
        slope = ins[1].reshape(shape) if ins[1].size > 1 else ins[1].reshape(())
        return [jnp.where(x > 0, x, slope * x)]
    if kind == "rrelu":  # inference behaviour: the mean of the random slope range
        slope = (a.float("lower_bound", 0.125) + a.float("upper_bound", 0.334)) / 2
    else:
        slope = a.float("slope", 0.25)
    return [jnp.where(x > 0, x, slope * x)]


def _pooling(ins, a: Attrs, ctx):
    x = ins[0]
    pool_type = a.str("pool_type", "max", ("max", "avg", "sum"))
    n = x.ndim - 2
    if not 1 <= n <= 3:
        raise FormatError(f"{a.where}: pooling needs a 3-D to 5-D input, got shape {x.shape}")
    layout = _layout(a, n)
    if a.bool("global_pool", False):
        y = layer_ops.global_pooling(x, pool_type="max" if pool_type == "max" else "avg", layout=layout)
        if pool_type == "sum":
            y = y * math.prod(x.shape[i] for i, c in enumerate(layout) if c not in "NC")
        return [y]
    kernel = _spatial(a, "kernel", n, 1)
    convention = a.str("pooling_convention", "valid", ("valid", "full"))
    y = layer_ops.pooling(x, pool_type="max" if pool_type == "max" else "avg", kernel=kernel,
                          strides=_spatial(a, "stride", n, 1), padding=_spatial(a, "pad", n, 0),
                          ceil_mode=convention == "full",
                          count_include_pad=pool_type == "sum" or a.bool("count_include_pad", True), layout=layout)
    return [y * math.prod(kernel) if pool_type == "sum" else y]


def _flatten(ins, a, ctx):
    return [ins[0].reshape(ins[0].shape[0], -1)]


def _softmax_output(ins, a: Attrs, ctx):
    x = ins[0]
    if a.bool("multi_output", False):
        return [layer_ops.softmax(x, axis=1)]
    if a.bool("preserve_shape", False) or x.ndim <= 2:
        return [layer_ops.softmax(x, axis=-1)]
    return [layer_ops.softmax(x.reshape(x.shape[0], -1), axis=-1).reshape(x.shape)]


def _softmax(ins, a: Attrs, ctx):
    return [layer_ops.softmax(ins[0], axis=a.int("axis", -1), temperature=a.float("temperature", 1.0))]


def _log_softmax(ins, a: Attrs, ctx):
    return [layer_ops.log_softmax(ins[0], axis=a.int("axis", -1), temperature=a.float("temperature", 1.0))]


def _dropout(ins, a: Attrs, ctx):
    rate = a.float("p", 0.5)
    if not 0 <= rate < 1:
        raise FormatError(f"{a.where}: dropout p={rate} must be in [0, 1)")
    active = ctx.training or a.str("mode", "training", ("training", "always")) == "always"
    if not active or rate == 0:
        return [ins[0]]
    return [layer_ops.dropout(ins[0], _random.next_key(), rate=rate, axes=a.tuple("axes", ()))]


def _concat(ins, a: Attrs, ctx):
    return [jnp.concatenate(ins, axis=a.int("dim", 1))]


def mxnet_reshape(src: tuple[int, ...], codes: tuple[int, ...], where: str) -> tuple[int, ...]:
    """MXNet's Reshape target shape: 0 copies a dimension, -1 infers one, -2 copies the rest,
    -3 merges two, -4 splits one into the next two codes."""
    out: list[int] = []
    i = j = 0
    try:
        while j < len(codes):
            code = codes[j]
            if code > 0 or code == -1:
                out.append(code)
                i += 1
            elif code == 0:
                out.append(src[i])
                i += 1
            elif code == -2:
                out.extend(src[i:])
                i = len(src)
            elif code == -3:
                out.append(src[i] * src[i + 1])
                i += 2
            elif code == -4:
                first, second = codes[j + 1], codes[j + 2]
                if first == -1:
                    first = src[i] // second
                if second == -1:
                    second = src[i] // first
                out.extend([first, second])
                i += 1
                j += 2
            else:
                raise FormatError(f"{where}: unknown Reshape code {code}")
            j += 1
    except IndexError:
        raise FormatError(f"{where}: Reshape codes {codes} do not fit input shape {src}") from None
    if out.count(-1) > 1:
        raise FormatError(f"{where}: Reshape codes {codes} infer more than one dimension")
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        out[out.index(-1)] = math.prod(src) // known if known else 0
    if math.prod(out) != math.prod(src):
        raise FormatError(f"{where}: Reshape codes {codes} turn {src} into {tuple(out)}: sizes differ")
    return tuple(out)


def _reshape(ins, a: Attrs, ctx):
    if a.bool("reverse", False):
        raise FormatError(f"{a.where}: Reshape with reverse=True is not supported")
    return [ins[0].reshape(mxnet_reshape(tuple(ins[0].shape), a.tuple("shape"), a.where))]


def _embedding(ins, a: Attrs, ctx):
    weight = ins[1]
    if weight.shape != (a.int("input_dim"), a.int("output_dim")):
        raise FormatError(f"{a.where}: weight shape {weight.shape} does not match input_dim/output_dim")
    return [layer_ops.embedding(ins[0], weight)]


def _binary(fn: Callable) -> Callable:
    return lambda ins, a, ctx: [fn(ins[0], ins[1])]


def _scalar(fn: Callable) -> Callable:
    return lambda ins, a, ctx: [fn(ins[0], jnp.asarray(a.float("scalar", 0.0), ins[0].dtype))]


def _unary(fn: Callable) -> Callable:
    return lambda ins, a, ctx: [fn(ins[0])]


def _clip(ins, a: Attrs, ctx):
    return [jnp.clip(ins[0], a.float("a_min", -np.inf), a.float("a_max", np.inf))]


def _add_n(ins, a, ctx):
    total = ins[0]
    for x in ins[1:]:
        total = total + x
    return [total]


CONVERTERS: dict[str, Callable] = {
    "FullyConnected": _fully_connected, "Convolution": _convolution, "BatchNorm": _batch_norm,
    "GroupNorm": _group_norm,
    "Activation": _activation, "LeakyReLU": _leaky_relu, "Pooling": _pooling, "Flatten": _flatten,
    "flatten": _flatten, "SoftmaxOutput": _softmax_output, "softmax": _softmax, "log_softmax": _log_softmax,
    "SoftmaxActivation": lambda ins, a, ctx: [layer_ops.softmax(
        ins[0], axis=1 if a.str("mode", "instance", ("instance", "channel")) == "channel" else -1)],
    "Dropout": _dropout, "Concat": _concat, "concat": _concat, "Reshape": _reshape, "reshape": _reshape,
    "Embedding": _embedding, "clip": _clip, "add_n": _add_n, "ElementWiseSum": _add_n,
    "relu": _unary(jax.nn.relu), "sigmoid": _unary(jax.nn.sigmoid), "tanh": _unary(jnp.tanh),
    "exp": _unary(jnp.exp), "log": _unary(jnp.log), "sqrt": _unary(jnp.sqrt), "square": _unary(jnp.square),
    "negative": _unary(jnp.negative), "abs": _unary(jnp.abs), "reciprocal": _unary(jnp.reciprocal),
    "identity": _unary(lambda x: x), "_copy": _unary(lambda x: x), "BlockGrad": _unary(jax.lax.stop_gradient),
    "stop_gradient": _unary(jax.lax.stop_gradient),
    "_plus_scalar": _scalar(jnp.add), "_minus_scalar": _scalar(jnp.subtract),
    "_rminus_scalar": _scalar(lambda x, s: s - x), "_mul_scalar": _scalar(jnp.multiply),
    "_div_scalar": _scalar(jnp.divide), "_rdiv_scalar": _scalar(lambda x, s: s / x),
    "_power_scalar": _scalar(jnp.power), "_rpower_scalar": _scalar(lambda x, s: s ** x),
    "_maximum_scalar": _scalar(jnp.maximum), "_minimum_scalar": _scalar(jnp.minimum),
}
for _names, _fn in ((("elemwise_add", "_plus", "_Plus", "_add", "broadcast_add", "broadcast_plus"), jnp.add),
                    (("elemwise_sub", "_minus", "_Minus", "_sub", "broadcast_sub", "broadcast_minus"), jnp.subtract),
                    (("elemwise_mul", "_mul", "_Mul", "broadcast_mul"), jnp.multiply),
                    (("elemwise_div", "_div", "_Div", "broadcast_div"), jnp.divide),
                    (("_maximum", "_Maximum", "broadcast_maximum"), jnp.maximum),
                    (("_minimum", "_Minimum", "broadcast_minimum"), jnp.minimum),
                    (("_power", "_Power", "broadcast_power"), jnp.power)):
    for _name in _names:
        CONVERTERS[_name] = _binary(_fn)

#: Operators whose inputs after the first are labels (ignored in forward).
_LABEL_OPS = {"SoftmaxOutput": 1, "LinearRegressionOutput": 1, "LogisticRegressionOutput": 1}
#: Inputs of BatchNorm that are running statistics (aux states).
_AUX_INPUTS = {"BatchNorm": (3, 4)}


# -- the program -------------------------------------------------------------------------------------
@dataclass
class _Node:
    op: str
    name: str
    inputs: list[tuple[int, int]]
    attrs: Attrs


def _parse_nodes(doc: dict, where: str) -> tuple[list[_Node], list[tuple[int, int]]]:
    nodes_json, heads_json = doc.get("nodes"), doc.get("heads")
    if not isinstance(nodes_json, list) or not isinstance(heads_json, list) or not heads_json:
        raise FormatError(f"{where}: 'nodes' and 'heads' must be non-empty lists")

    def entry_ref(item: Any, limit: int, at: str) -> tuple[int, int]:
        if not isinstance(item, list) or len(item) not in (2, 3) or not all(type(i) is int for i in item):
            raise FormatError(f"{at}: an input must be [node, output(, version)], got {item!r:.60}")
        if not 0 <= item[0] < limit or item[1] != 0:
            raise FormatError(f"{at}: input {item!r:.60} must refer to output 0 of an earlier node")
        return item[0], item[1]

    nodes, unknown = [], []
    for i, entry in enumerate(nodes_json):
        at = f"{where} node #{i}"
        if not isinstance(entry, dict) or not isinstance(entry.get("op"), str) or \
                not isinstance(entry.get("name"), str) or not isinstance(entry.get("inputs", []), list):
            raise FormatError(f"{at}: expected an object with string 'op' and 'name' and list 'inputs'")
        raw = {}
        for key in ("attrs", "attr", "param"):
            value = entry.get(key, {})
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise FormatError(f"{at}: '{key}' must map names to strings")
            raw.update(value)
        op = entry["op"]
        if op != "null" and op not in CONVERTERS:
            unknown.append(f"{op} (node {entry['name']!r})")
        inputs = [entry_ref(item, i, at) for item in entry.get("inputs", [])]
        if op == "null" and inputs:
            raise FormatError(f"{at}: a variable ('null' node) cannot have inputs")
        nodes.append(_Node(op, entry["name"], inputs, Attrs(raw, f"{at} {op} {entry['name']!r}")))
    if unknown:
        raise FormatError(f"{where}: unsupported MXNet operator(s): {', '.join(unknown[:20])}. Supported: "
                          f"{sorted(CONVERTERS)}")
    variables = [node.name for node in nodes if node.op == "null"]
    if len(set(variables)) != len(variables):
        raise FormatError(f"{where}: two variables ('null' nodes) have the same name")
    heads = [entry_ref(item, len(nodes), f"{where} heads") for item in heads_json]
    return nodes, heads


class MXNetProgram:
    """Interprets validated MXNet nodes with JAX (see the module docstring)."""

    def __init__(self, nodes: list[_Node], heads: list[tuple[int, int]], data_names: list[str]):
        self.nodes, self.heads, self.data_names = nodes, heads, data_names
        self._data_index = {name: i for i, name in enumerate(data_names)}

    def __call__(self, block: Any, args: tuple) -> Any:
        if len(args) != len(self.data_names):
            raise TypeError(f"expected {len(self.data_names)} input(s) {self.data_names}, got {len(args)}")
        params = block._reg_params
        training = autograd.is_training()
        values: list[Any] = []
        for node in self.nodes:
            if node.op == "null":
                index = self._data_index.get(node.name)
                values.append(args[index] if index is not None else
                              params[node.name].data() if node.name in params else None)
                continue
            inputs = [values[src] for src, _ in node.inputs]
            if node.op in _LABEL_OPS:
                inputs = inputs[:_LABEL_OPS[node.op]]
            if any(x is None for x in inputs):
                raise ValueError(f"{node.attrs.where}: an input of this node is not a data input or parameter")

            def set_state(position: int, value: Any, node: _Node = node) -> None:
                params[self.nodes[node.inputs[position][0]].name].set_data(value)

            values.append(CONVERTERS[node.op](inputs, node.attrs, Context(training, set_state))[0])
        outputs = [values[i] for i, _ in self.heads]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def import_mxnet(cls: type, doc: dict, where: str, input_names: Sequence[str] | None, param_file: Any,
                 device: Any, allow_missing: bool, ignore_extra: bool) -> Any:
    """A SymbolBlock running the MXNet symbol ``doc`` with parameters from ``param_file`` (required:
    MXNet symbol files do not store parameter shapes)."""
    nodes, heads = _parse_nodes(doc, where)
    names = list(input_names) if input_names is not None else ["data"]
    variables = {node.name: i for i, node in enumerate(nodes) if node.op == "null"}
    missing = [n for n in names if n not in variables]
    if missing:
        raise ValueError(f"{where}: input_names {missing} are not variables of the symbol; variables: "
                         f"{sorted(variables)[:20]}")
    if param_file is None:
        raise ValueError(f"{where}: importing an MXNet symbol needs its .params file (MXNet symbol files do not "
                         "store parameter shapes)")
    arrays = {k.split(":", 1)[-1] if k.startswith(("arg:", "aux:")) else k: v
              for k, v in load_parameter_file(param_file).items()}
    aux, used = set(), set()
    for node in nodes:
        for position, (src, _) in enumerate(node.inputs):
            source = nodes[src].name
            if position in _AUX_INPUTS.get(node.op, ()):
                aux.add(source)
            if node.op not in _LABEL_OPS or position < _LABEL_OPS[node.op]:
                used.add(source)
    specs = []
    for name in variables:
        if name in names or name not in used:
            continue
        if name not in arrays:
            if allow_missing:
                continue
            raise ValueError(f"{where}: parameter {name!r} is not in the parameter file {str(param_file)!r}")
        array = arrays[name]
        specs.append(ParamSpec(name, array.shape, array.dtype, "null" if name in aux else "write",
                               name not in aux))
    extra = sorted(set(arrays) - {s.name for s in specs})
    if extra and not ignore_extra:
        raise ValueError(f"{where}: the parameter file has arrays {extra[:10]} that the symbol does not use; "
                         "pass ignore_extra=True to skip them")
    block = cls._create(MXNetProgram(nodes, heads, names), specs)
    for spec in specs:
        block._reg_params[spec.name].set_data(arrays[spec.name])
        if device is not None:
            block._reg_params[spec.name].reset_device(device)
    return block
