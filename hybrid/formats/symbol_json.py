"""The symbol file (``path-symbol.json``): a block's traced graphs, per input signature and mode.

Written by :func:`hybrid._compiled.symbol_export.export_block` (``block.export``), read by ``SymbolBlock``.

Layout (format ``hybrid-symbol``, version 1; see docs/file-formats.md)::

    {"format": "hybrid-symbol", "version": 1, "checksum": "sha256:...", "producer": "hybrid 0.1.0",
     "params": [{"name": "0.weight", "shape": [16, 8], "dtype": "float32", "grad_req": "write",
                 "differentiable": true, "lr_mult": 1.0, "wd_mult": 1.0}, ...],
     "data": ["data"],
     "signatures": [{"inputs": [{"name": "data", "shape": [4, 8], "dtype": "float32"}],
                     "graphs": {"predict": GRAPH, "train": GRAPH}}]}

``GRAPH`` is described in :mod:`hybrid.formats.graph_json`. ``train`` is present
only when it differs from ``predict`` (BatchNorm batch statistics, dropout).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from . import serialization
from . import codec
from ..errors import FormatError
from .graph_json import GraphDoc, decode_graph
from .jsonfile import encode, read_json, sha256_hex, verify_seal

__all__ = ["FORMAT", "VERSION", "ParamSpec", "Signature", "SymbolFile", "write_symbol_files", "read_symbol_file",
           "decode_symbol", "RNG_INPUTS"]

FORMAT = "hybrid-symbol"
VERSION = 1
RNG_INPUTS = ("rng_key", "rng_counter")
_GRAD_REQS = ("write", "add", "null")


@dataclass(frozen=True)
class ParamSpec:
    """What a SymbolBlock needs to create one Parameter."""

    name: str
    shape: tuple[int, ...]
    dtype: Any
    grad_req: str = "write"
    differentiable: bool = True
    lr_mult: float = 1.0
    wd_mult: float = 1.0


@dataclass
class Signature:
    """One input signature: data input types and the predict (and train) graph."""

    inputs: list[tuple[str, tuple, Any]]
    predict: GraphDoc
    train: GraphDoc | None = None


@dataclass
class SymbolFile:
    params: list[ParamSpec]
    data_names: list[str]
    signatures: list[Signature]
    params_sha256: str | None = None  # the digest of the parameter file written with it (None: older files)


# -- writing --------------------------------------------------------------------------------------
def write_symbol_files(symbol_file: str, param_file: str, params: dict[str, Any], data_names: list[str],
                       signatures: list[dict]) -> None:
    """Write the symbol file and its parameter file as one group (both or neither).

    ``params``: ``{name: parameter}`` (anything with ``data()``, ``shape``, ``dtype``, ``grad_req``,
    ``differentiable``, ``lr_mult``, ``wd_mult``); ``signatures``: ``[{"inputs": [...], "graphs": {...}}]``
    with graphs encoded by :func:`hybrid.formats.graph_json.encode_graph`.
    """
    param_bytes = serialization.encode_arrays({name: np.asarray(param.data()) for name, param in params.items()})
    doc = {"format": FORMAT, "version": VERSION, "producer": _producer(),
           "params": [_encode_param(name, param) for name, param in params.items()], "data": data_names,
           "signatures": signatures, "params_sha256": sha256_hex(param_bytes)}
    # the symbol file names the digest of its parameter file, so a pair that was not written together
    # (a crash between the two renames) is refused at import instead of computing neither model
    serialization.atomic_write_group([(param_file, param_bytes), (symbol_file, encode(doc))])


def _producer() -> str:
    from .. import __version__
    return f"hybrid {__version__} (jax {jax.__version__})"


def _encode_param(name: str, param: Any) -> dict:
    return {"name": name, "shape": list(param.shape), "dtype": codec.dtype_name(param.dtype),
            "grad_req": param.grad_req, "differentiable": param.differentiable, "lr_mult": param.lr_mult,
            "wd_mult": param.wd_mult}


# -- reading --------------------------------------------------------------------------------------
def read_symbol_file(path: str | os.PathLike) -> tuple[str, dict]:
    """``('hybrid', doc)`` for our format (checksum verified) or ``('mxnet', doc)`` for an MXNet symbol."""
    where = f"symbol file {os.fspath(path)!r}"
    doc = read_json(path, "symbol file", sealed=False)
    if isinstance(doc, dict) and doc.get("format") == FORMAT:
        verify_seal(doc, where)
        return "hybrid", doc
    if isinstance(doc, dict) and "nodes" in doc and "heads" in doc:
        return "mxnet", doc
    raise FormatError(f"{where}: neither a hybrid symbol file (format {FORMAT!r}) nor an MXNet symbol JSON")


def _check_keys(entry: Any, required: set, where: str) -> None:
    if not isinstance(entry, dict) or set(entry) != required:
        got = sorted(entry)[:12] if isinstance(entry, dict) else type(entry).__name__
        raise FormatError(f"{where}: expected an object with keys {sorted(required)}, got {got}")


def _decode_param(entry: Any, where: str) -> ParamSpec:
    _check_keys(entry, {"name", "shape", "dtype", "grad_req", "differentiable", "lr_mult", "wd_mult"}, where)
    name = entry["name"]
    if not isinstance(name, str) or not name or name.startswith("%") or name in RNG_INPUTS:
        raise FormatError(f"{where}: invalid parameter name {name!r:.60}")
    if entry["grad_req"] not in _GRAD_REQS or not isinstance(entry["differentiable"], bool):
        raise FormatError(f"{where}: grad_req must be one of {_GRAD_REQS} and differentiable a boolean")
    for key in ("lr_mult", "wd_mult"):
        value = entry[key]
        if type(value) not in (int, float) or not math.isfinite(value):
            raise FormatError(f"{where}: {key} must be a finite number, got {value!r:.40}")
    return ParamSpec(name, codec.parse_shape(entry["shape"], where),
                     codec.parse_dtype(entry["dtype"], where, allow_keys=False), entry["grad_req"],
                     entry["differentiable"], float(entry["lr_mult"]), float(entry["wd_mult"]))


def _check_inputs(gdoc: GraphDoc, params: dict[str, ParamSpec], data: dict[str, tuple], where: str) -> None:
    for value in gdoc.graph.inputs:
        name, got = value.name, (value.shape, value.dtype)
        if name in params:
            expected = (params[name].shape, params[name].dtype)
        elif name in data:
            expected = data[name]
        elif name == "rng_key":
            expected = ((), codec.parse_dtype("key<fry>", where))
        elif name == "rng_counter":
            expected = ((), np.dtype("uint32"))
        else:
            raise FormatError(f"{where}: graph input {name!r:.60} is neither a parameter, a data input nor "
                              f"one of {RNG_INPUTS}")
        if got != expected:
            raise FormatError(f"{where}: graph input {name!r} has type {value.type_str()}, expected "
                              f"{codec.dtype_name(expected[1])}{list(expected[0])}")
    for name in gdoc.state_names:
        if name not in params:
            raise FormatError(f"{where}: state output for unknown parameter {name!r:.60}")


def decode_symbol(doc: dict, where: str) -> SymbolFile:
    """Validate and rebuild a symbol document (graphs checked by abstract evaluation)."""
    version = doc.get("version")
    if type(version) is not int or version < 1:
        raise FormatError(f"{where}: invalid format version {version!r:.40}")
    if version > VERSION:
        raise FormatError(f"{where}: written in format version {version} by a newer hybrid; this version reads "
                          f"up to {VERSION}")
    required = {"format", "version", "checksum", "producer", "params", "data", "signatures"}
    _check_keys({k: v for k, v in doc.items() if k != "params_sha256"} if isinstance(doc, dict) else doc,
                required, where)
    params_sha256 = doc.get("params_sha256")
    if params_sha256 is not None and not (isinstance(params_sha256, str) and len(params_sha256) == 64):
        raise FormatError(f"{where}: 'params_sha256' must be a SHA-256 hex digest")
    if not isinstance(doc["params"], list) or not isinstance(doc["signatures"], list) or not doc["signatures"]:
        raise FormatError(f"{where}: 'params' must be a list and 'signatures' a non-empty list")
    params: dict[str, ParamSpec] = {}
    for i, entry in enumerate(doc["params"]):
        spec = _decode_param(entry, f"{where} param #{i}")
        if spec.name in params:
            raise FormatError(f"{where}: parameter {spec.name!r} is declared twice")
        params[spec.name] = spec
    data_names = doc["data"]
    if not isinstance(data_names, list) or not all(isinstance(n, str) for n in data_names) or \
            len(set(data_names)) != len(data_names) or set(data_names) & (set(params) | set(RNG_INPUTS)):
        raise FormatError(f"{where}: 'data' must list distinct input names, different from parameter names")
    signatures = []
    for i, entry in enumerate(doc["signatures"]):
        at = f"{where} signature #{i}"
        _check_keys(entry, {"inputs", "graphs"}, at)
        if not isinstance(entry["inputs"], list) or len(entry["inputs"]) != len(data_names):
            raise FormatError(f"{at}: 'inputs' must list the {len(data_names)} data inputs")
        inputs = []
        for j, item in enumerate(entry["inputs"]):
            _check_keys(item, {"name", "shape", "dtype"}, f"{at} input #{j}")
            if item["name"] != data_names[j]:
                raise FormatError(f"{at} input #{j}: expected {data_names[j]!r}, got {item['name']!r:.60}")
            inputs.append((item["name"], codec.parse_shape(item["shape"], at),
                           codec.parse_dtype(item["dtype"], at, allow_keys=False)))
        graphs = entry["graphs"]
        if not isinstance(graphs, dict) or "predict" not in graphs or not set(graphs) <= {"predict", "train"}:
            raise FormatError(f"{at}: 'graphs' must hold 'predict' and optionally 'train'")
        data = {name: (shape, dtype) for name, shape, dtype in inputs}
        decoded = {}
        for mode, gdoc in graphs.items():
            decoded[mode] = decode_graph(gdoc, f"{at} {mode} graph")
            _check_inputs(decoded[mode], params, data, f"{at} {mode} graph")
        signatures.append(Signature(inputs, decoded["predict"], decoded.get("train")))
    return SymbolFile(list(params.values()), data_names, signatures, params_sha256)
