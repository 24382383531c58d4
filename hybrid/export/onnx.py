"""ONNX export through ``jax2onnx``: the predict-mode forward as an ONNX model, parameters as initializers.

    hybrid.export.to_onnx(net, "net.onnx", x)           # the first axis of every input is named "B"
    session = onnxruntime.InferenceSession("net.onnx")
    y, = session.run(None, {"data": np.asarray(x)})

Needs ``jax2onnx`` and ``onnx`` (``pip install 'hybrid[onnx]'``), imported on the first export.
"""
from __future__ import annotations

import logging
import os
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jcore

from .._core import lazy as _lazy
from .. import autograd
from .._compiled.cached_op import data_input_names
from ..formats.serialization import atomic_write
from ..errors import ExportError

__all__ = ["to_onnx"]

_BATCH = "B"  # the name of the symbolic batch dimension in the model


def to_onnx(net: Any, path: str | os.PathLike, *example_inputs: Any, dynamic_batch: bool = True,
            opset: int | None = None) -> str:
    """Write ``net``'s predict-mode forward for inputs shaped like ``example_inputs`` to ``path`` as ONNX.

    The parameters are stored in the model as initializers (running statistics included; dropout is off).
    Inputs are named ``data`` (one) or ``data0``, ``data1``, ...; outputs ``output`` or ``output0``, ...
    (the leaves of what ``forward`` returns, in ``jax.tree_util`` order). With ``dynamic_batch`` the first
    axis of every input is the symbolic dimension ``B``, so the model runs on any batch size; otherwise
    every shape is fixed to the example's. ``opset`` defaults to jax2onnx's (23 with jax2onnx 0.17).
    Parameters with deferred shapes are completed by one predict-mode call on ``example_inputs``.
    The file is written atomically: on any failure ``path`` is left as it was. Returns ``path``.

    Raises ImportError without jax2onnx/onnx; TypeError for an input that is not an array; ValueError for
    ``dynamic_batch`` with a 0-d input; RuntimeError for uninitialised parameters; ExportError naming the
    JAX primitive (and the block path) that jax2onnx cannot convert, for a forward that fails with a symbolic
    batch axis, or for a model over protobuf's 2 GiB. Errors of ``forward`` on the example inputs (a
    ShapeError...) propagate unchanged.
    """
    try:
        import jax2onnx
    except ImportError as exc:
        raise ImportError(f"to_onnx needs the 'jax2onnx' and 'onnx' packages (pip install 'hybrid[onnx]'): "
                          f"{exc}") from exc
    arrays = _check_inputs(example_inputs, dynamic_batch)
    _complete_parameters(net, arrays)
    forward, raised = _inference_function(net)
    traced = jax.make_jaxpr(forward)(*arrays)
    if _finds(traced.jaxpr, _is_nd_max_pool):
        forward = _rewriting(forward)
    specs = [jax.ShapeDtypeStruct((_BATCH,) + x.shape[1:] if dynamic_batch else x.shape, x.dtype) for x in arrays]
    options = {} if opset is None else {"opset": int(opset)}
    try:
        with _without_untyped_shape_notices():
            model = jax2onnx.to_onnx(forward, specs, model_name=type(net).__name__,
                                     input_names=data_input_names(len(arrays)),
                                     output_names=_output_names(len(traced.out_avals)), **options)
    except Exception as exc:
        if exc not in raised and exc.__cause__ not in raised:
            raise _conversion_error(net, exc) from exc
        if not dynamic_batch:
            raise
        raise ExportError(f"to_onnx: forward of {type(net).__name__} runs on the example inputs but not with a "
                          f"symbolic batch axis ({type(exc).__name__}: {exc}); keep the batch size out of Python "
                          "and NumPy code, or pass dynamic_batch=False") from exc
    try:
        data = model.SerializeToString()
    except ValueError as exc:  # protobuf refuses messages over 2 GiB
        raise ExportError(f"to_onnx: the ONNX model of {type(net).__name__} cannot be serialised into one "
                          f"file ({exc}); models over 2 GiB are not supported") from exc
    path = os.fspath(path)
    atomic_write(path, lambda handle: handle.write(data))
    return path


def _check_inputs(example_inputs: Sequence[Any], dynamic_batch: bool) -> list:
    if not example_inputs:
        raise TypeError("to_onnx: give at least one example input: to_onnx(net, path, x)")
    arrays = []
    for i, x in enumerate(example_inputs):
        if not isinstance(x, (jax.Array, np.ndarray)):
            raise TypeError(f"to_onnx: example input {i} is a {type(x).__name__}; inputs must be arrays "
                            "(jax or NumPy)")
        if dynamic_batch and x.ndim == 0:
            raise ValueError(f"to_onnx: dynamic_batch needs inputs with a leading batch axis; example input {i} "
                             "is 0-d (pass dynamic_batch=False)")
        arrays.append(_lazy.concrete(x) if isinstance(x, jax.Array) else jnp.asarray(x))
    return arrays


def _complete_parameters(net: Any, arrays: list) -> None:
    """Refuse uninitialised parameters; make one predict-mode call if some still wait for their shapes."""
    params = net._unique_params()
    uninitialised = [p.name for p in params if not p.is_initialized and not p.is_deferred]
    if uninitialised:
        raise RuntimeError(f"to_onnx: parameters {uninitialised[:5]} of {type(net).__name__} are not "
                           "initialised; call net.initialize() first")
    if any(not p.is_initialized for p in params):
        with autograd.pause():
            net(*arrays)


def _inference_function(net: Any) -> tuple[Callable, list]:
    """A pure function of the inputs running ``net`` in predict mode with its state as constants, returning
    the flat list of outputs; and the list where it keeps the exceptions ``forward`` raised."""
    state = net.state()
    raised: list = []

    def forward(*inputs: Any) -> tuple:
        try:
            out, _ = net.apply(state, *inputs)
        except Exception as exc:
            raised.append(exc)
            raise
        return tuple(jax.tree_util.tree_leaves(out))
    return forward, raised


def _output_names(n: int) -> list[str]:
    return ["output"] if n == 1 else [f"output{i}" for i in range(n)]


class _UntypedShapeNotice(logging.Filter):
    """Drops onnx_ir's warning that it leaves the shape of an intermediate value of unknown type out of the
    model's optional value_info (jax2onnx leaves some shape computations untyped; the model is complete)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("The value type for shape")


@contextmanager
def _without_untyped_shape_notices() -> Iterator[None]:
    logger, notice = logging.getLogger("onnx_ir.serde"), _UntypedShapeNotice()
    logger.addFilter(notice)
    try:
        yield
    finally:
        logger.removeFilter(notice)


def _conversion_error(net: Any, exc: Exception) -> ExportError:
    """The ExportError for a failed conversion, naming the equation jax2onnx was lowering when it failed."""
    eqns = _lowered_equations(exc)
    message = str(exc).strip() or type(exc).__name__
    if not eqns:
        return ExportError(f"to_onnx: jax2onnx could not convert {type(net).__name__}: {message}")
    eqn = eqns[-1]
    scope = ".".join(part for e in eqns for part in str(e.source_info.name_stack).split("/") if part)
    where = f"block {scope!r} of {type(net).__name__}" if scope else type(net).__name__
    shapes = ", ".join(v.aval.str_short() for v in eqn.invars if hasattr(v.aval, "str_short"))
    return ExportError(f"to_onnx: jax2onnx cannot convert the JAX primitive '{eqn.primitive.name}' ({shapes}) "
                       f"in {where}: {message}. Compute it another way in forward, or export with "
                       "hybrid.export.export_deployment instead")


def _lowered_equations(exc: BaseException) -> list:
    """The JAX equations being lowered when ``exc`` was raised, outermost first (a call's body is lowered
    inside the call's equation): the ``eqn`` locals of the frames it passed through, or of its cause's."""
    while exc is not None:
        eqns: list = []
        tb = exc.__traceback__
        while tb is not None:
            eqn = tb.tb_frame.f_locals.get("eqn")
            if isinstance(eqn, jcore.JaxprEqn) and (not eqns or eqns[-1] is not eqn):
                eqns.append(eqn)
            tb = tb.tb_next
        if eqns:
            return eqns
        exc = exc.__cause__ or exc.__context__
    return []


# -- max pooling that onnxruntime can run --------------------------------------------------
# jax2onnx lowers a rank-r reduce_window_max to an r-d MaxPool (pooling over every axis, the unpooled ones
# with window 1), and onnxruntime runs MaxPool over at most 3 axes. So a pooling of a tensor of rank 4 or
# more is rewritten as poolings of rank 2 or 3: at most two pooled axes at a time (a max over a box is a max
# over its sides in turn), every other axis merged into one.

def _pooled_axes(params: dict) -> list[int]:
    return [a for a, (w, s, p, b, d) in enumerate(zip(params["window_dimensions"], params["window_strides"],
                                                    params["padding"], params["base_dilation"],
                                                    params["window_dilation"]))
            if (w, s, tuple(p), b, d) != (1, 1, (0, 0), 1, 1)]


def _is_nd_max_pool(eqn: Any) -> bool:
    return (eqn.primitive is lax.reduce_window_max_p and eqn.invars[0].aval.ndim > 3
            and bool(_pooled_axes(eqn.params)))


def _merged_max_pool(x: Any, params: dict) -> Any:
    """``reduce_window_max(x, **params)`` as poolings of tensors of rank 3 or less."""
    pooled = _pooled_axes(params)
    for start in range(0, len(pooled), 2):
        x = _pool_axes(x, params, pooled[start:start + 2])
    return x


def _pool_axes(x: Any, params: dict, pooled: list[int]) -> Any:
    """Max pooling of ``x`` over the axes ``pooled`` only, as ``params`` says for them."""
    kept = [a for a in range(x.ndim) if a not in pooled]
    order = kept + pooled
    moved = order != sorted(order)
    y = x.transpose(order) if moved else x
    y = y.reshape((-1,) + tuple(x.shape[a] for a in pooled))

    def pick(name: str, unit: Any) -> tuple:  # the merged axis first, unpooled
        return (unit,) + tuple(params[name][a] for a in pooled)

    y = lax.reduce_window_max_p.bind(y, window_dimensions=pick("window_dimensions", 1),
                                     window_strides=pick("window_strides", 1), padding=pick("padding", (0, 0)),
                                     base_dilation=pick("base_dilation", 1), window_dilation=pick("window_dilation", 1))
    y = y.reshape(tuple(x.shape[a] for a in kept) + y.shape[1:])
    return y.transpose(np.argsort(order)) if moved else y


_CALLS = {"jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call", "checkpoint", "remat"}


def _inlined_jaxpr(eqn: Any) -> Any:
    """``(jaxpr, consts)`` of a call-like equation (its value is its body's on its inputs), else None."""
    if eqn.primitive.name not in _CALLS:
        return None
    for name in ("jaxpr", "call_jaxpr"):
        body = eqn.params.get(name)
        if isinstance(body, jcore.ClosedJaxpr):
            return body.jaxpr, body.consts
        if isinstance(body, jcore.Jaxpr) and not body.constvars:
            return body, []
    return None


def _finds(jaxpr: Any, test: Callable[[Any], bool]) -> bool:
    """Whether an equation of ``jaxpr`` or of a jaxpr nested in it passes ``test``."""
    return any(test(eqn) or any(_finds(sub, test) for sub in jcore.jaxprs_in_params(eqn.params))
               for eqn in jaxpr.eqns)


def _rewriting(fn: Callable) -> Callable:
    """``fn`` with its N-d max poolings replaced by :func:`_merged_max_pool` (same values)."""
    def rewritten(*args: Any) -> tuple:
        closed = jax.make_jaxpr(fn)(*args)
        return tuple(_evaluate(closed.jaxpr, closed.consts, args))
    return rewritten


def _evaluate(jaxpr: Any, consts: Sequence[Any], args: Sequence[Any]) -> list:
    env: dict = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))

    def read(v: Any) -> Any:
        return v.val if isinstance(v, jcore.Literal) else env[v]

    for eqn in jaxpr.eqns:
        inputs = [read(v) for v in eqn.invars]
        body = _inlined_jaxpr(eqn)
        with _name_scopes(str(eqn.source_info.name_stack)), eqn.ctx.manager:
            if _is_nd_max_pool(eqn):
                outputs = [_merged_max_pool(inputs[0], eqn.params)]
            elif body is not None and _finds(body[0], _is_nd_max_pool):
                outputs = _evaluate(body[0], body[1], inputs)
            else:
                outputs = eqn.primitive.bind(*inputs, **eqn.primitive.get_bind_params(eqn.params))
                outputs = outputs if eqn.primitive.multiple_results else [outputs]
        env.update(zip(eqn.outvars, outputs))
    return [read(v) for v in jaxpr.outvars]


@contextmanager
def _name_scopes(stack: str) -> Iterator[None]:
    """Re-enter the block scopes (``features/3``) an equation was traced in, so errors still name them."""
    with ExitStack() as scopes:
        for part in filter(None, stack.split("/")):
            scopes.enter_context(jax.named_scope(part))
        yield
