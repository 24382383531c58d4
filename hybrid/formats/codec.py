"""JSON encoding of the values found in graphs: dtypes, shapes, attributes, pytree structures, constants.

Encoding is an allow-list: plain JSON scalars, tuples (JSON arrays), and a few
tagged objects, each a one-key dict such as ``{"dtype": "float32"}``,
``{"float": "nan"}``, ``{"enum": "GatherScatterMode.FILL_OR_DROP"}``,
``{"struct": "GatherDimensionNumbers", "fields": {...}}``, ``{"list": [...]}``,
``{"prng_impl": "fry"}``.  Decoding builds only these types, so a file can
never name a class or function to call.  Anything else raises ExportError on
writing and FormatError on reading.
"""
from __future__ import annotations

import base64
import binascii
import enum
import functools
import math
from typing import Any

import jax
import numpy as np
from jax import lax

from ..errors import ExportError, FormatError

__all__ = ["MAX_DIM", "MAX_ELEMENTS", "dtype_name", "parse_dtype", "encode_value", "decode_value",
           "encode_tree", "decode_tree", "parse_shape", "encode_array", "decode_array", "check_finite"]

MAX_DIM = 2 ** 31 - 1
MAX_ELEMENTS = 2 ** 40
MAX_RANK = 32
_NUMERIC = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
            "bfloat16", "float32", "float64", "complex64", "complex128")
_KEY_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg")
_ENUMS = {cls.__name__: cls for cls in (lax.Precision, lax.GatherScatterMode, lax.RoundingMethod,
                                        lax.DotAlgorithmPreset, lax.FftType, lax.RandomAlgorithm)}
_STRUCTS = {cls.__name__: cls for cls in (lax.GatherDimensionNumbers, lax.ScatterDimensionNumbers,
                                          lax.ConvDimensionNumbers)}
_TAGS = ("float", "list", "dtype", "enum", "struct", "prng_impl")


@functools.lru_cache(maxsize=None)
def _key_dtypes() -> dict[str, Any]:
    dtypes = [jax.eval_shape(functools.partial(jax.random.key, 0, impl=impl)).dtype for impl in _KEY_IMPLS]
    return {str(dtype): dtype for dtype in dtypes}


@functools.lru_cache(maxsize=None)
def prng_impls() -> dict[str, Any]:
    """PRNG implementation objects by name, as found in ``random_seed``/``random_wrap`` parameters."""
    found = {}
    for impl in _KEY_IMPLS:
        jaxpr = jax.make_jaxpr(functools.partial(jax.random.key, 0, impl=impl))()
        for eqn in jaxpr.eqns:
            if "impl" in eqn.params:
                found[eqn.params["impl"].name] = eqn.params["impl"]
    return found


def dtype_name(dtype: Any) -> str:
    """``'float32'``, ``'bfloat16'``, ... or ``'key<fry>'`` for PRNG key arrays."""
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return str(dtype)
    return np.dtype(dtype).name


def parse_dtype(name: Any, where: str, allow_keys: bool = True) -> Any:
    """The dtype named ``name`` (numeric names, and PRNG key types when ``allow_keys``)."""
    if isinstance(name, str):
        if name in _NUMERIC:
            return np.dtype(jax.numpy.dtype(name))
        if allow_keys and name in _key_dtypes():
            return _key_dtypes()[name]
    raise FormatError(f"{where}: unsupported dtype {name!r}")


def parse_shape(value: Any, where: str) -> tuple[int, ...]:
    """A shape: a list of at most 32 ints in [0, 2**31), with at most 2**40 elements."""
    if not isinstance(value, (list, tuple)) or len(value) > MAX_RANK:
        raise FormatError(f"{where}: expected a shape (a list of at most {MAX_RANK} integers), got {value!r:.80}")
    for dim in value:
        if type(dim) is not int or not 0 <= dim <= MAX_DIM:
            raise FormatError(f"{where}: invalid dimension {dim!r:.40} in shape (expected 0 <= d < 2**31)")
    if math.prod(value) > MAX_ELEMENTS:
        raise FormatError(f"{where}: shape {list(value)} has more than 2**40 elements")
    return tuple(value)


# -- attribute values ----------------------------------------------------------------------
def _encode_float(value: float) -> Any:
    if math.isfinite(value):
        return value
    return {"float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}


def encode_value(value: Any) -> Any:
    """JSON form of an attribute value; ExportError (with the type) when it has none."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, enum.Enum):
        if _ENUMS.get(type(value).__name__) is type(value):
            return {"enum": f"{type(value).__name__}.{value.name}"}
        raise ExportError(f"enum {type(value).__name__}.{value.name} is not supported")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _encode_float(float(value))
    if isinstance(value, tuple):
        struct = _STRUCTS.get(type(value).__name__)
        if struct is type(value):
            return {"struct": type(value).__name__,
                    "fields": {f: encode_value(getattr(value, f)) for f in value._fields}}
        if type(value) is not tuple:
            raise ExportError(f"values of type {type(value).__name__} are not supported")
        return [encode_value(v) for v in value]
    if isinstance(value, list):
        return {"list": [encode_value(v) for v in value]}
    if _is_dtype(value):
        return {"dtype": dtype_name(value)}
    if type(value).__name__ == "PRNGImpl":
        name = getattr(value, "name", None)
        if isinstance(name, str) and prng_impls().get(name) is value:
            return {"prng_impl": name}
    if hasattr(value, "jaxpr") or type(value).__name__ in ("Jaxpr", "ClosedJaxpr"):
        raise ExportError("it holds a sub-program (jaxpr), e.g. control flow (cond/while/scan) or a custom call")
    raise ExportError(f"values of type {type(value).__name__} are not supported")


def _is_dtype(value: Any) -> bool:
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return True
    return type(value).__name__ == "KeyTy" and jax.dtypes.issubdtype(value, jax.dtypes.prng_key)


def decode_value(value: Any, where: str) -> Any:
    """Inverse of :func:`encode_value`; FormatError on anything not produced by it."""
    if value is None or isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, list):
        return tuple(decode_value(v, where) for v in value)
    if not isinstance(value, dict):
        raise FormatError(f"{where}: unexpected value {value!r:.80}")
    tags = [t for t in _TAGS if t in value]
    allowed = {"struct": {"struct", "fields"}}.get(tags[0] if tags else "", set(tags))
    if len(tags) != 1 or set(value) != allowed:
        raise FormatError(f"{where}: unknown tagged value with keys {sorted(value)[:6]}")
    tag, payload = tags[0], value[tags[0]]
    if tag == "float":
        if payload not in ("nan", "inf", "-inf"):
            raise FormatError(f"{where}: invalid float {payload!r:.40}")
        return float(payload)
    if tag == "list":
        if not isinstance(payload, list):
            raise FormatError(f"{where}: 'list' must hold a JSON array")
        return [decode_value(v, where) for v in payload]
    if tag == "dtype":
        return parse_dtype(payload, where)
    if tag == "enum":
        cls_name, _, member = payload.partition(".") if isinstance(payload, str) else ("", "", "")
        cls = _ENUMS.get(cls_name)
        if cls is None or member not in cls.__members__:
            raise FormatError(f"{where}: unknown enum value {payload!r:.80}")
        return cls[member]
    if tag == "prng_impl":
        impl = prng_impls().get(payload) if isinstance(payload, str) else None
        if impl is None:
            raise FormatError(f"{where}: unknown PRNG implementation {payload!r:.40}")
        return impl
    struct = _STRUCTS.get(payload) if isinstance(payload, str) else None
    fields = value["fields"]
    if struct is None or not isinstance(fields, dict) or set(fields) != set(struct._fields):
        raise FormatError(f"{where}: invalid struct {payload!r:.40}")
    return struct(**{f: decode_value(fields[f], where) for f in struct._fields})


def check_finite(value: Any, where: str) -> None:
    """Raise FormatError if ``value`` (or anything inside it) is a NaN or infinite float."""
    if isinstance(value, float) and not math.isfinite(value):
        raise FormatError(f"{where}: non-finite value {value} is not allowed here")
    if isinstance(value, (tuple, list)):
        for item in value:
            check_finite(item, where)


# -- pytree structures -------------------------------------------------------------------------
def _encode_template(node: Any) -> Any:
    if node is None or (isinstance(node, int) and not isinstance(node, bool)):
        return node
    if type(node) is tuple:
        return [_encode_template(v) for v in node]
    if type(node) is list:
        return {"list": [_encode_template(v) for v in node]}
    if type(node) is dict and all(isinstance(k, str) for k in node):
        return {"dict": [[k, _encode_template(v)] for k, v in node.items()]}
    raise ExportError(f"pytree node of type {type(node).__name__} is not supported (use tuples, lists, "
                      "dicts with string keys, or None)")


def encode_tree(treedef: Any) -> Any:
    """JSON form of a pytree structure: a template with leaf numbers (tuples as arrays)."""
    return _encode_template(jax.tree_util.tree_unflatten(treedef, list(range(treedef.num_leaves))))


def _decode_template(value: Any, where: str) -> Any:
    if value is None or (type(value) is int):
        return value
    if isinstance(value, list):
        return tuple(_decode_template(v, where) for v in value)
    if isinstance(value, dict) and set(value) == {"list"} and isinstance(value["list"], list):
        return [_decode_template(v, where) for v in value["list"]]
    if isinstance(value, dict) and set(value) == {"dict"} and isinstance(value["dict"], list):
        items = value["dict"]
        if not all(isinstance(i, list) and len(i) == 2 and isinstance(i[0], str) for i in items):
            raise FormatError(f"{where}: invalid dict structure")
        return {k: _decode_template(v, where) for k, v in items}
    raise FormatError(f"{where}: invalid pytree structure {value!r:.80}")


def decode_tree(value: Any, where: str) -> Any:
    """Inverse of :func:`encode_tree`; leaves must be numbered 0..n-1 in flattening order."""
    template = _decode_template(value, where)
    leaves, treedef = jax.tree_util.tree_flatten(template)
    if leaves != list(range(len(leaves))):
        raise FormatError(f"{where}: pytree leaves must be numbered 0..n-1 in order, got {leaves[:10]}")
    return treedef


# -- constant arrays ----------------------------------------------------------------------------
def encode_array(array: Any) -> dict:
    """``{"shape", "dtype", "value"}`` for scalars, ``{"shape", "dtype", "base64"}`` (little-endian) otherwise."""
    array = np.asarray(array)
    name = dtype_name(array.dtype)
    if name not in _NUMERIC:
        raise ExportError(f"constant arrays of dtype {array.dtype} are not supported")
    entry = {"shape": list(array.shape), "dtype": name}
    if array.ndim == 0 and array.dtype.kind in "biuf":
        item = array.item()
        entry["value"] = _encode_float(item) if isinstance(item, float) else item
    else:
        if array.dtype.kind != "V" and array.dtype.byteorder == ">":
            array = array.astype(array.dtype.newbyteorder("<"))
        entry["base64"] = base64.b64encode(np.ascontiguousarray(array).tobytes()).decode("ascii")
    return entry


def decode_array(entry: dict, where: str) -> np.ndarray:
    """Inverse of :func:`encode_array`. The byte length must match the shape exactly."""
    shape = parse_shape(entry.get("shape"), where)
    dtype = parse_dtype(entry.get("dtype"), where, allow_keys=False)
    keys = set(entry) - {"shape", "dtype", "name"}
    if keys == {"value"} and shape == ():
        value = entry["value"]
        if isinstance(value, dict):
            value = decode_value(value, where)
        kinds = {"b": (bool,), "i": (int,), "u": (int,), "f": (int, float)}.get(dtype.kind, ())
        if type(value) not in kinds:
            raise FormatError(f"{where}: scalar {value!r:.40} does not fit dtype {dtype}")
        try:
            return np.asarray(value, dtype=dtype)
        except (OverflowError, ValueError) as exc:
            raise FormatError(f"{where}: scalar {value!r:.40} does not fit dtype {dtype}") from exc
    if keys != {"base64"} or not isinstance(entry["base64"], str):
        raise FormatError(f"{where}: a constant needs 'value' (scalars) or 'base64' data")
    expected = math.prod(shape) * dtype.itemsize
    if len(entry["base64"]) > 4 * (expected + 2) // 3 + 4:
        raise FormatError(f"{where}: constant data is longer than its shape {list(shape)} needs")
    try:
        raw = base64.b64decode(entry["base64"], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise FormatError(f"{where}: invalid base64 data ({exc})") from None
    if len(raw) != expected:
        raise FormatError(f"{where}: constant of shape {list(shape)} and dtype {dtype} needs {expected} bytes, "
                          f"got {len(raw)}")
    little = dtype if dtype.kind == "V" else dtype.newbyteorder("<")
    return np.frombuffer(raw, dtype=little).astype(dtype, copy=False).reshape(shape)
