"""Shape and layout operators (reshape with MXNet's codes, concat/stack/split, transpose, slicing, tiling,
broadcasting, casting, padding) and array creation (zeros/ones/full/arange/linspace)."""
from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax

from ._registry import Attrs, OpContext, register
from ._util import axis as _axis


# -- reshape -------------------------------------------------------------------------------------
def mxnet_reshape(src: tuple[int, ...], codes: tuple[int, ...], where: str, reverse: bool = False,
                  error: type[Exception] = ValueError) -> tuple[int, ...]:
    """MXNet's Reshape target shape: 0 copies a dimension, -1 infers one, -2 copies the rest, -3 merges
    two, -4 splits one into the next two codes (one of them may be -1). ``reverse`` matches the codes to
    the dimensions from the right."""
    if reverse:
        src, codes = src[::-1], codes[::-1]
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
                if first == -1 and second > 0:
                    first = src[i] // second
                if second == -1 and first > 0:
                    second = src[i] // first
                if first * second != src[i]:
                    raise error(f"{where}: reshape code -4 cannot split dimension {src[i]} into "
                                f"({codes[j + 1]}, {codes[j + 2]})")
                out.extend([first, second])
                i += 1
                j += 2
            else:
                raise error(f"{where}: unknown reshape code {code}")
            j += 1
    except IndexError:
        raise error(f"{where}: reshape codes {codes} do not fit input shape {src}") from None
    if out.count(-1) > 1:
        raise error(f"{where}: reshape codes {codes} infer more than one dimension")
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        if not known or math.prod(src) % known:
            raise error(f"{where}: reshape codes {codes} cannot turn {src} into a whole shape")
        out[out.index(-1)] = math.prod(src) // known
    if math.prod(out) != math.prod(src):
        raise error(f"{where}: reshape codes {codes} turn {src} into {tuple(out)}: sizes differ")
    return tuple(out[::-1]) if reverse else tuple(out)


@register("Reshape", "reshape")
def reshape(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    if not a.has("shape") and a.has("target_shape"):  # MXNet's deprecated form: 0 keeps, no other codes
        target = a.tuple("target_shape")
        shape = tuple(s if t == 0 else t for s, t in zip(x.shape, target)) + tuple(target[x.ndim:])
        return [x.reshape(shape)]
    shape = mxnet_reshape(tuple(x.shape), a.tuple("shape"), a.where, a.bool("reverse", False), a.error)
    return [x.reshape(shape)]


@register("Flatten", "flatten")
def flatten(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    return [x.reshape(x.shape[0], -1) if x.ndim else x.reshape(1, 1)]


@register("reshape_like", inputs=("lhs", "rhs"))
def reshape_like(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``lhs`` with its dimensions ``[lhs_begin, lhs_end)`` replaced by ``rhs``'s ``[rhs_begin, rhs_end)``."""
    x, like = ins[0], ins[1]

    def bounds(begin_key: str, end_key: str, ndim: int) -> tuple[int, int]:
        begin, end = a.opt_int(begin_key), a.opt_int(end_key)
        begin = 0 if begin is None else begin % ndim if begin < 0 else begin
        end = ndim if end is None else end % ndim if end < 0 else end
        return begin, end

    lb, le = bounds("lhs_begin", "lhs_end", x.ndim)
    rb, re_ = bounds("rhs_begin", "rhs_end", like.ndim)
    shape = tuple(x.shape[:lb]) + tuple(like.shape[rb:re_]) + tuple(x.shape[le:])
    if math.prod(shape) != x.size:
        raise a.fail(f"cannot reshape lhs {tuple(x.shape)} to {shape} taken from rhs {tuple(like.shape)}")
    return [x.reshape(shape)]


@register("expand_dims")
def expand_dims(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    axis = a.int("axis")
    if not -x.ndim - 1 <= axis <= x.ndim:
        raise a.fail(f"axis={axis} is out of range for an input with {x.ndim} dimensions")
    return [jnp.expand_dims(x, axis)]


@register("squeeze")
def squeeze(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Removes the size-1 axes (those in ``axis``, or all); a result with no axes left has shape (1,), as
    in MXNet."""
    x = ins[0]
    axes = a.axes("axis")
    if axes is None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        axes = tuple(v % x.ndim for v in axes)
        bad = [v for v in axes if x.shape[v] != 1]
        if bad:
            raise a.fail(f"cannot squeeze axes {bad} of shape {tuple(x.shape)}: their size is not 1")
    y = jnp.squeeze(x, axes)
    return [y.reshape(1) if y.ndim == 0 and x.ndim else y]


@register("transpose")
def transpose(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    axes = a.tuple("axes", ())
    if axes and sorted(v % x.ndim for v in axes) != list(range(x.ndim)):
        raise a.fail(f"axes={axes} is not a permutation of the {x.ndim} axes")
    return [jnp.transpose(x, axes or None)]


@register("SwapAxis", "swapaxes")
def swapaxes(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    return [jnp.swapaxes(x, _axis(a, x.ndim, "dim1", 0), _axis(a, x.ndim, "dim2", 0))]


@register("flip", "reverse")
def flip(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    return [jnp.flip(x, tuple(v % x.ndim for v in a.tuple("axis")))]


@register("depth_to_space")
def depth_to_space(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    b = a.int("block_size")
    n, c, h, w = x.shape
    y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    return [y.reshape(n, c // (b * b), h * b, w * b)]


@register("space_to_depth")
def space_to_depth(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    b = a.int("block_size")
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return [y.reshape(n, c * b * b, h // b, w // b)]


# -- joining and splitting -----------------------------------------------------------------------
@register("Concat", "concat", "_rnn_param_concat", variadic=True)
def concat(ins: list, a: Attrs, ctx: OpContext) -> list:
    return [jnp.concatenate(ins, axis=a.int("dim", 1))]


@register("stack", variadic=True)
def stack(ins: list, a: Attrs, ctx: OpContext) -> list:
    return [jnp.stack(ins, axis=a.int("axis", 0))]


def _split_count(a: Attrs) -> int:
    return a.int("num_outputs")


@register("SliceChannel", "split", num_outputs=_split_count)
def split(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``num_outputs`` equal parts along ``axis`` (default 1); ``squeeze_axis`` drops the axis when
    each part has size 1."""
    x = ins[0]
    parts = a.int("num_outputs")
    axis = _axis(a, x.ndim, "axis", 1)
    if parts < 1 or x.shape[axis] % parts:
        raise a.fail(f"num_outputs={parts} does not divide axis {axis} of shape {tuple(x.shape)}")
    outs = jnp.split(x, parts, axis=axis)
    if a.bool("squeeze_axis", False):
        if x.shape[axis] != parts:
            raise a.fail(f"squeeze_axis=True needs parts of size 1 on axis {axis}, shape {tuple(x.shape)}")
        outs = [jnp.squeeze(o, axis) for o in outs]
    return list(outs)


def _split_v2_parts(a: Attrs) -> tuple[int, tuple[int, ...]]:
    """(sections, split points): ``split_v2``'s ``indices_or_sections`` or the symbol's ``sections`` /
    ``indices`` (whose first entry is 0)."""
    if a.has("indices_or_sections"):
        value = a.tuple("indices_or_sections")
        if isinstance(a.raw["indices_or_sections"], (int, np.integer)) or (
                isinstance(a.raw["indices_or_sections"], str) and "(" not in a.raw["indices_or_sections"]
                and "[" not in a.raw["indices_or_sections"]):
            return value[0], ()
        return 0, value
    sections = a.int("sections", 0)
    indices = a.tuple("indices", ())
    return sections, indices[1:] if indices[:1] == (0,) else indices


def _split_v2_count(a: Attrs) -> int:
    sections, points = _split_v2_parts(a)
    return sections if sections > 0 else len(points) + 1


@register("_split_v2", "split_v2", num_outputs=_split_v2_count)
def split_v2(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``split_v2``: ``sections`` equal parts, or parts starting at the split points."""
    x = ins[0]
    axis = _axis(a, x.ndim, "axis", 0)
    sections, points = _split_v2_parts(a)
    if sections > 0 and x.shape[axis] % sections:
        raise a.fail(f"{sections} sections do not divide axis {axis} of shape {tuple(x.shape)}")
    outs = jnp.split(x, sections if sections > 0 else list(points), axis=axis)
    if a.bool("squeeze_axis", False):
        outs = [jnp.squeeze(o, axis) for o in outs]
    return list(outs)


# -- slicing ---------------------------------------------------------------------------------------
@register("slice", "crop", "_slice")
def slice_(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    begin, end, step = a.opt_tuple("begin"), a.opt_tuple("end"), a.opt_tuple("step")
    if len(begin) != len(end) or len(begin) > x.ndim or (step and len(step) != len(begin)):
        raise a.fail(f"begin={begin}, end={end}, step={step} must have equal lengths <= {x.ndim}")
    index = []
    for i in range(len(begin)):
        s = step[i] if step else None
        if s == 0:
            raise a.fail("step must not be 0")
        index.append(slice(begin[i], end[i], s))
    return [x[tuple(index)]]


@register("slice_axis")
def slice_axis(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    axis = _axis(a, x.ndim)
    size = x.shape[axis]
    begin, end = a.int("begin"), a.opt_int("end")
    begin = begin + size if begin < 0 else begin
    end = size if end is None else end + size if end < 0 else end
    if not 0 <= begin < end <= size:
        raise a.fail(f"begin={a.int('begin')}, end={a.opt_int('end')} select nothing valid from axis {axis} of "
                     f"size {size}")
    return [lax.slice_in_dim(x, begin, end, axis=axis)]


@register("slice_like", inputs=("data", "shape_like"))
def slice_like(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``data`` cut to ``shape_like``'s size on ``axes`` (all of shape_like's axes when empty)."""
    x, like = ins[0], ins[1]
    axes = a.tuple("axes", ())
    if not axes:
        if like.ndim != x.ndim:
            raise a.fail(f"data {tuple(x.shape)} and shape_like {tuple(like.shape)} need the same number of "
                         "dimensions when axes is empty")
        axes = tuple(range(x.ndim))
    index = [slice(None)] * x.ndim
    for v in axes:
        v = v % x.ndim
        if like.shape[v] > x.shape[v]:
            raise a.fail(f"shape_like {tuple(like.shape)} is larger than data {tuple(x.shape)} on axis {v}")
        index[v] = slice(0, like.shape[v])
    return [x[tuple(index)]]


# -- repetition and broadcasting --------------------------------------------------------------------
@register("tile")
def tile(ins: list, a: Attrs, ctx: OpContext) -> list:
    return [jnp.tile(ins[0], a.tuple("reps"))]


@register("repeat")
def repeat(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    axis = a.opt_int("axis")
    return [jnp.repeat(x, a.int("repeats"), axis=None if axis is None else axis % x.ndim)]


@register("broadcast_to")
def broadcast_to(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``shape``'s 0 entries keep the input's size."""
    x = ins[0]
    shape = a.tuple("shape")
    if len(shape) != x.ndim:
        raise a.fail(f"shape={shape} must have {x.ndim} entries (the input's dimensions)")
    target = tuple(d if t == 0 else t for d, t in zip(x.shape, shape))
    bad = [i for i, (d, t) in enumerate(zip(x.shape, target)) if d != t and d != 1]
    if bad:
        raise a.fail(f"cannot broadcast shape {tuple(x.shape)} to {target}: axes {bad} have size other than 1")
    return [jnp.broadcast_to(x, target)]


@register("broadcast_axis", "broadcast_axes")
def broadcast_axis(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    axes, sizes = a.tuple("axis", ()), a.tuple("size", ())
    if len(axes) != len(sizes):
        raise a.fail(f"axis={axes} and size={sizes} must have equal lengths")
    target = list(x.shape)
    for v, s in zip(axes, sizes):
        v = v % x.ndim
        if x.shape[v] != 1:
            raise a.fail(f"axis {v} of shape {tuple(x.shape)} has size {x.shape[v]}, not 1")
        target[v] = s
    return [jnp.broadcast_to(x, tuple(target))]


@register("broadcast_like", inputs=("lhs", "rhs"))
def broadcast_like(ins: list, a: Attrs, ctx: OpContext) -> list:
    x, like = ins[0], ins[1]
    lhs_axes, rhs_axes = a.tuple("lhs_axes", ()), a.tuple("rhs_axes", ())
    if not lhs_axes and not rhs_axes:
        return [jnp.broadcast_to(x, like.shape)]
    if len(lhs_axes) != len(rhs_axes):
        raise a.fail(f"lhs_axes={lhs_axes} and rhs_axes={rhs_axes} must have equal lengths")
    target = list(x.shape)
    for lhs_axis, rhs_axis in zip(lhs_axes, rhs_axes):
        target[lhs_axis % x.ndim] = like.shape[rhs_axis % like.ndim]
    return [jnp.broadcast_to(x, tuple(target))]


# -- dtypes and shapes -------------------------------------------------------------------------------
@register("Cast", "cast", "amp_cast")
def cast(ins: list, a: Attrs, ctx: OpContext) -> list:
    return [ins[0].astype(a.dtype("dtype", None) or _missing(a, "dtype"))]


def _missing(a: Attrs, key: str):
    raise a.fail(f"missing attribute {key!r}")


def _index_dtype():
    return jnp.asarray(np.int64(0)).dtype


@register("shape_array", "_shape_array")
def shape_array(ins: list, a: Attrs, ctx: OpContext) -> list:
    """The input's shape as an integer array (int64 with JAX's 64-bit mode, else int32)."""
    return [jnp.asarray(np.asarray(ins[0].shape, np.int64), _index_dtype())]


@register("size_array")
def size_array(ins: list, a: Attrs, ctx: OpContext) -> list:
    return [jnp.asarray(np.asarray([math.prod(ins[0].shape)], np.int64), _index_dtype())]


@register("diag")
def diag(ins: list, a: Attrs, ctx: OpContext) -> list:
    """A 1-D input makes a diagonal matrix; a higher one gives its ``k``-th diagonal over
    ``axis1``/``axis2`` (last axis)."""
    x = ins[0]
    k = a.int("k", 0)
    if x.ndim == 1:
        return [jnp.diag(x, k)]
    return [jnp.diagonal(x, k, a.int("axis1", 0), a.int("axis2", 1))]


@register("Pad", "pad")
def pad(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``pad_width`` holds (before, after) for every axis in order; ``mode`` constant, edge or reflect."""
    x = ins[0]
    mode = a.str("mode", "constant", ("constant", "edge", "reflect"))
    width = a.tuple("pad_width")
    if len(width) != 2 * x.ndim:
        raise a.fail(f"pad_width={width} must hold 2 entries per axis ({2 * x.ndim} for shape {tuple(x.shape)})")
    pairs = [(width[2 * i], width[2 * i + 1]) for i in range(x.ndim)]
    if mode == "constant":
        return [jnp.pad(x, pairs, constant_values=jnp.asarray(a.float("constant_value", 0.0), x.dtype))]
    return [jnp.pad(x, pairs, mode=mode)]


# -- creation -----------------------------------------------------------------------------------------
def _shape(a: Attrs) -> tuple[int, ...]:
    shape = a.tuple("shape", ())
    if any(d < 0 for d in shape):
        raise a.fail(f"shape={shape} must not hold negative sizes")
    return shape


@register("_zeros", "zeros", "_zeros_without_dtype", inputs=())
def zeros(ins: list, a: Attrs, ctx: OpContext) -> list:
    return [jnp.zeros(_shape(a), a.dtype())]


@register("_ones", "ones", inputs=())
def ones(ins: list, a: Attrs, ctx: OpContext) -> list:
    return [jnp.ones(_shape(a), a.dtype())]


@register("_full", "full", inputs=())
def full(ins: list, a: Attrs, ctx: OpContext) -> list:
    value = a.float("value") if a.has("value") else a.float("val")
    return [jnp.full(_shape(a), value, a.dtype())]


@register("_arange", "arange", inputs=())
def arange(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``[start, stop)`` by ``step`` (``[0, start)`` without ``stop``), each value ``repeat`` times."""
    start, stop, step = a.float("start", 0.0), a.opt_float("stop"), a.float("step", 1.0)
    if stop is None:
        start, stop = 0.0, start
    if step == 0:
        raise a.fail("step must not be 0")
    count = max(0, math.ceil((stop - start) / step))
    values = start + step * np.arange(count, dtype=np.float64)
    values = np.repeat(values, a.int("repeat", 1))
    return [jnp.asarray(values.astype(a.dtype()))]


@register("_linspace", "linspace", inputs=())
def linspace(ins: list, a: Attrs, ctx: OpContext) -> list:
    values = np.linspace(a.float("start"), a.float("stop"), a.int("num"), endpoint=a.bool("endpoint", True))
    return [jnp.asarray(values.astype(a.dtype()))]


@register("_eye", "eye", inputs=())
def eye(ins: list, a: Attrs, ctx: OpContext) -> list:
    n = a.int("N")
    return [jnp.eye(n, a.int("M", 0) or n, a.int("k", 0), a.dtype())]


def _arange_like(x: Any, a: Attrs) -> Any:
    axis = a.opt_int("axis")
    shape = tuple(x.shape) if axis is None else (x.shape[axis % x.ndim],)
    count = math.prod(shape)
    repeat = a.int("repeat", 1)
    values = a.float("start", 0.0) + a.float("step", 1.0) * (np.arange(count) // repeat)
    return jnp.asarray(values.reshape(shape).astype(np.float32)).astype(x.dtype if jnp.issubdtype(
        x.dtype, jnp.floating) else jnp.float32)


@register("_contrib_arange_like")
def arange_like(ins: list, a: Attrs, ctx: OpContext) -> list:
    """A range shaped like ``data`` (or like its ``axis``): ``start + step * (i // repeat)``."""
    return [_arange_like(ins[0], a)]


@register("amp_multicast", variadic=True, num_outputs=lambda a: a.int("num_outputs"))
def amp_multicast(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Every input cast to the widest floating dtype among them (``cast_narrow``: the narrowest)."""
    dtypes = [x.dtype for x in ins]
    ranked = sorted(dtypes, key=lambda d: np.dtype(d).itemsize)
    target = ranked[0] if a.bool("cast_narrow", False) else ranked[-1]
    return [x.astype(target) for x in ins]


@register("cumsum", "_np_cumsum", inputs=("a",))
def cumsum(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    axis = a.opt_int("axis")
    dtype = a.dtype("dtype", None)
    return [jnp.cumsum(x.reshape(-1) if axis is None else x, axis=0 if axis is None else axis, dtype=dtype)]


@register("Crop", "crop_like", variadic=True)
def crop(ins: list, a: Attrs, ctx: OpContext) -> list:
    """MXNet's deprecated Crop of NCHW data: to ``h_w`` or to the second input's size, at ``offset`` or
    centred (``center_crop``)."""
    x = ins[0]
    if len(ins) > 1:
        height, width = ins[1].shape[2], ins[1].shape[3]
    else:
        height, width = a.tuple("h_w")
    if a.bool("center_crop", False):
        top, left = (x.shape[2] - height) // 2, (x.shape[3] - width) // 2
    else:
        top, left = a.tuple("offset", (0, 0))
    if top < 0 or left < 0 or top + height > x.shape[2] or left + width > x.shape[3]:
        raise a.fail(f"cannot crop {height}x{width} at ({top}, {left}) from data of shape {tuple(x.shape)}")
    return [x[:, :, top:top + height, left:left + width]]
