"""Compiled execution of blocks: trace -> graph passes -> lowering -> XLA, cached per signature.

A :class:`CachedOp` belongs to one hybridized block.  Per input signature
(tree structure, shapes and dtypes of array leaves, values of non-array leaves,
train/predict mode) it holds a :class:`CompiledForward`: the flat parameter
list gathered at trace time, the optimised graph, and jitted functions for
inference and for recorded training (forward returning residuals, plus a
compiled backward).  A call does a dict lookup, gathers the cached parameter
list's arrays, calls the executable and writes back state outputs.
"""
from __future__ import annotations

import functools
import itertools
import sys
import time
import weakref
from operator import attrgetter
from typing import Any, Callable, Sequence

import jax
import numpy as np

from . import _context, _functional, _lazy, compile_log
from . import random as _random
from ._state_lock import state_lock
from ._watch import watch
from .errors import HybridizeError
from .graph._lower import lower as lower_graph
from .graph import hoist, pipeline, precision
from ._memory_report import xla_bytes
from .graph.target import compiler_options
from .graph.ir import Graph
from .graph.memory import remat
from .graph._trace import from_jaxpr
from .parameter import Parameter, unique_params

_TRACER_ERRORS = (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
                  jax.errors.TracerIntegerConversionError)
_get_data = attrgetter("_data")
LIVE_CACHES: "weakref.WeakSet[CachedOp]" = weakref.WeakSet()  # for inspect.compile_caches
_TOKENS = itertools.count()  # names a CompiledForward in recorded programs' keys


def is_array(x: Any) -> bool:
    return isinstance(x, (jax.Array, np.ndarray))


class ArgSpec:
    """Splits call arguments into array leaves and static (Python) leaves."""

    __slots__ = ("treedef", "array_pos", "statics", "n_leaves")

    def __init__(self, leaves: list, treedef: Any):
        self.treedef = treedef
        self.n_leaves = len(leaves)
        self.array_pos = [i for i, leaf in enumerate(leaves) if is_array(leaf)]
        self.statics = {i: leaf for i, leaf in enumerate(leaves) if not is_array(leaf)}

    def rebuild(self, arrays: Sequence[Any]) -> tuple:
        leaves = [None] * self.n_leaves
        for i, value in self.statics.items():
            leaves[i] = value
        for i, value in zip(self.array_pos, arrays):
            leaves[i] = value
        return jax.tree_util.tree_unflatten(self.treedef, leaves)


def signature(leaves: list) -> tuple[tuple, list]:
    """Hashable key of a call's leaves (array shapes/dtypes, static values) and its array leaves."""
    parts = []
    arrays = []
    for leaf in leaves:
        if is_array(leaf):
            parts.append((leaf.shape, leaf.dtype))
            arrays.append(leaf)
        else:
            try:
                hash(leaf)
            except TypeError:
                raise TypeError(f"non-array argument {leaf!r} of type {type(leaf).__name__} is not hashable; "
                                "hybridized blocks take arrays or hashable Python values") from None
            parts.append(("static", type(leaf), leaf))
    return tuple(parts), arrays


class TraceResult:
    """A forward traced into a graph, with what is needed to call it."""

    def __init__(self, graph: Graph, params: list[Parameter], state_params: list[Parameter],
                 out_tree: Any, uses_rng: bool, n_outputs: int, attributes: list, attr_inputs: list,
                 out_avals: list):
        self.graph, self.params, self.state_params = graph, params, state_params
        self.out_tree, self.uses_rng, self.n_outputs = out_tree, uses_rng, n_outputs
        self.attributes = attributes  # (block, name) of attributes assigned in forward: outputs after the states
        self.attr_inputs = attr_inputs  # (block, name) of those read before being assigned: inputs after the data
        self.out_avals = out_avals  # shapes and dtypes of the outputs, then of the states and attributes


def _trace_once(block: Any, params: list[Parameter], spec: ArgSpec, arrays: list, attr_inputs: list):
    """make_jaxpr of the block's forward as a function of (params, inputs, rng); the attributes in
    ``attr_inputs`` are inputs too (after the call's arrays)."""
    info: dict = {}
    n_arrays = len(arrays)

    def fn(param_values, input_values, rng):
        with _functional.frame(dict(zip(params, param_values)), key=rng, frame_type=_functional.TraceFrame) as fr:
            try:
                fr.set_attributes(dict(zip(attr_inputs, input_values[n_arrays:])))
                out = block._run_forward(spec.rebuild(input_values[:n_arrays]))
            except _TRACER_ERRORS as exc:
                raise control_flow_error(block, exc) from exc
            except Exception as exc:
                if getattr(exc, "_hybrid_block", None) is None:
                    try:
                        exc._hybrid_block = block
                    except AttributeError:
                        pass
                raise
            finally:  # no tracer stays in an attribute: the call writes the assigned values back
                fr.restore_attributes()
        leaves, out_tree = jax.tree_util.tree_flatten(out)
        for leaf in leaves:
            if not isinstance(leaf, jax.Array):
                raise HybridizeError(f"forward returned a {type(leaf).__name__}; a hybridized forward must "
                                     "return arrays (or tuples/lists/dicts of arrays)")
        info.update(out_tree=out_tree, n_out=len(leaves), states=list(fr.updates), missing=dict(fr.missing),
                    accessed=dict(fr.accessed), uses_rng=fr.key_count > 0, attributes=list(fr.attributes))
        return leaves, list(fr.updates.values()) + list(fr.attributes.values())

    rng = (_key_type(), np.uint32(0))  # the key's type only: tracing needs no key (nor its compilation)
    attr_values = [getattr(b, name) for b, name in attr_inputs]
    closed = jax.make_jaxpr(fn)([p._data for p in params], list(arrays) + attr_values, rng)
    return closed, info


@functools.cache
def _key_type() -> jax.ShapeDtypeStruct:
    """The abstract value of a JAX random key (a scalar of the default implementation's key type)."""
    return jax.eval_shape(jax.random.key, 0)


def trace_block(block: Any, args: tuple) -> TraceResult:
    """Trace ``block.forward(*args)`` into a Graph; parameters with deferred shapes get initialised."""
    leaves, treedef = jax.tree_util.tree_flatten(args)
    spec = ArgSpec(leaves, treedef)
    arrays = [leaves[i] for i in spec.array_pos]
    params: list[Parameter] | None = None
    attr_inputs: list = []
    for _attempt in range(5):
        tree = unique_params(block.collect_params())
        if params is None:
            params = [p for p in tree if p.is_initialized]
        closed, info = _trace_once(block, params, spec, arrays, attr_inputs)
        read = [key for key in info["attributes"] if key not in attr_inputs and is_array(key[0].__dict__.get(key[1]))]
        if read:  # attributes that held arrays before forward assigned them: their values are inputs
            attr_inputs += read
            continue
        if info["missing"]:
            registered = set(tree)
            strays = [p for p in info["missing"] if p not in registered]
            if strays:
                raise HybridizeError(
                    f"forward uses parameter(s) {[p.name for p in strays]} that are not registered in the "
                    "block tree; assign them as attributes of a Block so they can be passed to the graph")
            params = None  # deferred parameters were initialised during the trace: trace again
            continue
        used = [p for p in params if p in info["accessed"]]
        if len(used) < len(params):
            params = used
            continue
        break
    else:
        raise HybridizeError("parameters kept changing while tracing; cannot build a stable graph")
    names = (_param_names(block, params) + data_input_names(len(arrays)) +
             [name for _, name in attr_inputs] + ["rng_key", "rng_counter"])
    graph = from_jaxpr(closed, names)
    if not info["uses_rng"]:
        graph = _drop_rng_inputs(graph)
    return TraceResult(graph, params, info["states"], info["out_tree"], info["uses_rng"], info["n_out"],
                       info["attributes"], attr_inputs, list(closed.out_avals))


def _drop_rng_inputs(graph: Graph) -> Graph:
    from .graph.passes.dce import dce
    graph, _ = dce(graph)
    rng_inputs = graph.inputs[-2:]
    used = {v for node in graph.nodes for v in node.inputs} | set(graph.outputs)
    if any(v in used for v in rng_inputs):
        raise HybridizeError("internal: random key used although no key was drawn")
    return graph.copy_with(inputs=graph.inputs[:-2])


def _param_names(block: Any, params: list[Parameter]) -> list[str]:
    by_id = {}
    for name, p in block.collect_params().items():
        by_id.setdefault(id(p), name)
    return [by_id.get(id(p), p.name or "param") for p in params]


def control_flow_error(block: Any, exc: BaseException) -> HybridizeError:
    """The error raised when a hybridized forward branches on an array value."""
    err = HybridizeError(
        f"forward of {type(block).__name__} uses the value of an array in Python control flow (if/while/"
        "for, bool(), int(), float() or NumPy conversion) while hybridized. Values are unknown while the "
        "graph is traced. Use jnp.where / jax.lax.cond / jax.lax.fori_loop / jax.lax.while_loop, pass "
        f"the value as a Python number instead of an array, or call without hybridize(). ({type(exc).__name__})")
    err._hybrid_block = block
    return err


class CompiledForward:
    """One traced and optimised forward and its jitted entry points."""

    def __init__(self, traced: TraceResult, passes: Sequence[str], remat: Any = None):
        self.signature = ""  # the input signature as text, for log lines
        self.ran = False  # whether the eager entry point has run (compiled) yet
        self.params = traced.params
        self.state_params = traced.state_params
        self.attributes = traced.attributes
        self.attr_inputs = traced.attr_inputs
        self.out_tree = traced.out_tree
        self.uses_rng = traced.uses_rng
        self.traced_graph = traced.graph
        self.n_outputs = traced.n_outputs
        start = time.perf_counter()
        self.graph, self.pass_stats = pipeline.run_passes(traced.graph, passes)
        self.pass_seconds = time.perf_counter() - start
        forward = self.forward = self.make_forward(self.graph)
        # the graph that is differentiated (recorded calls, calls inside a compiled training step): the
        # optimised graph with its rematerialisation plan applied
        self.train_graph, self.remat_plan = self.graph, None
        if remat is not None:
            self._apply_remat(remat)
        self.train_forward = forward if self.train_graph is self.graph else self.make_forward(self.train_graph)

        # State parameters (e.g. BatchNorm statistics) are passed separately so that their old
        # buffers can be donated: the program overwrites them.
        written = set(self.state_params)
        self.state_index = [i for i, p in enumerate(self.params) if p in written]
        self.other_index = [i for i, p in enumerate(self.params) if p not in written]
        self.state_inputs = [self.params[i] for i in self.state_index]
        self.other_inputs = [self.params[i] for i in self.other_index]

        def infer(state_values, other_values, input_values, rng):
            return forward(self.merge(state_values, other_values), input_values, rng)

        split = None if self.state_index else hoist.split_parameter_work(self.graph, len(self.params))
        self.infer = jax.jit(infer) if split is None else _HoistedInfer(self, split)
        self._infer_donating = jax.jit(infer, donate_argnums=(0,)) if self.state_index else None
        self.infer_in_frame = jax.jit(forward)  # inside other traces: no donation, one nested call
        self.train_in_frame = self.infer_in_frame if self.train_forward is forward else jax.jit(self.train_forward)
        self.token = next(_TOKENS)
        self._out_avals = traced.out_avals
        self._param_avals: list | None = None

    def run_eager(self, state_values: list, other_values: list, input_values: list, rng: tuple) -> tuple:
        """Run the forward on concrete arrays; the state buffers (e.g. running statistics) are reused
        for the new states when only their parameters hold them (the caller holds ``state_lock``)."""
        # references to each state array: its parameter, the caller's list, getrefcount's argument
        if self._infer_donating is not None and max(map(sys.getrefcount, state_values)) <= 3:
            return self._infer_donating(state_values, other_values, input_values, rng)
        return self.infer(state_values, other_values, input_values, rng)

    def make_forward(self, graph: Graph) -> Callable:
        """``forward(param_values, input_values, rng) -> (outputs, states)`` running ``graph``."""
        run_graph = lower_graph(graph, inline=True)
        n_out, uses_rng = self.n_outputs, self.uses_rng

        def forward(param_values, input_values, rng):
            flat = list(param_values) + list(input_values) + (list(rng) if uses_rng else [])
            results = run_graph(*flat)
            return results[:n_out], results[n_out:]
        return forward

    def training_memory(self, graph: Graph) -> int:
        """XLA's memory figure (temp + arguments + outputs - aliased bytes) of one forward+backward
        of ``graph`` with respect to the differentiable parameters."""
        forward = self.make_forward(graph)
        diff = [i for i, p in enumerate(self.params) if p.grad_req != "null"]
        n_params = len(self.params)
        specs = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in graph.inputs]

        def step(*flat):
            params, rest = list(flat[:n_params]), list(flat[n_params:])
            inputs, rng = (rest[:-2], rest[-2:]) if self.uses_rng else (rest, ())

            def f(p_diff):
                values = list(params)
                for i, v in zip(diff, p_diff):
                    values[i] = v
                return forward(values, inputs, rng)

            outputs, vjp_fn, _ = jax.vjp(f, [params[i] for i in diff], has_aux=True)
            return vjp_fn([jax.numpy.ones_like(o) for o in outputs])

        compiled = jax.jit(step, compiler_options=compiler_options()).lower(*specs).compile()
        return xla_bytes(compiled)

    def _apply_remat(self, spec: Any) -> None:
        start = time.perf_counter()
        weights = self.graph.inputs[:len(self.params)]
        graph, plan, details = remat.choose_plan(self.graph, spec, weights, self.training_memory)
        self.pass_stats.append(pipeline.PassStat("remat", len(self.graph), len(graph),
                                                 time.perf_counter() - start, details))
        self.train_graph, self.remat_plan = graph, plan

    def merge(self, state_values: Sequence, other_values: Sequence) -> list:
        """Parameter values in graph order from the state and non-state lists."""
        values = [None] * len(self.params)
        for i, v in zip(self.state_index, state_values):
            values[i] = v
        for i, v in zip(self.other_index, other_values):
            values[i] = v
        return values

    def current_values(self) -> tuple[list, list]:
        """The parameters' arrays as (state, non-state) lists, the form the jitted entry points take."""
        return list(map(_get_data, self.state_inputs)), list(map(_get_data, self.other_inputs))

    def with_attributes(self, arrays: list) -> list:
        """The call's arrays followed by the current values of the attributes the forward reads."""
        if not self.attr_inputs:
            return arrays
        return list(arrays) + [getattr(block, name) for block, name in self.attr_inputs]

    def write_states(self, states: Sequence, set_param: Callable[[Parameter, Any], None]) -> None:
        """Store the state outputs of a call: parameters with ``set_param``, then attributes."""
        n = len(self.state_params)
        for param, state in zip(self.state_params, states):
            set_param(param, state)
        for (block, name), value in zip(self.attributes, states[n:]):
            block._set_state_attribute(name, value)

    def record(self, tape: _lazy.Tape, arrays: list, rng: tuple) -> tuple[list, list]:
        """Stage one call on ``tape``; returns lazy (outputs, states)."""
        params = self.params
        if _context.current().frame is None:
            with state_lock:
                values = list(map(_get_data, params))
                if self._param_avals is None:
                    self._param_avals = [jax.core.ShapedArray(v.shape, v.dtype) for v in values]
                param_slots = tape.read_params(params, values, self._param_avals)  # the entry implies avals
        else:
            param_slots = tape.slots_of([p.data() for p in params], False)  # noted on the tape as parameter reads
        rest = list(arrays) + list(rng)
        slots = list(param_slots) + tape.slots_of(rest, False)
        n_params, n_arrays, n_out, forward = len(params), len(arrays), self.n_outputs, self.train_forward

        def call(*flat_values):
            p, rest = flat_values[:n_params], flat_values[n_params:]
            outputs, states = forward(p, rest[:n_arrays], rest[n_arrays:])
            return list(outputs) + list(states)

        results = tape.call(call, self.token, None, self._out_avals, token=self.token, slots=slots)
        return results[:n_out], results[n_out:]


class CachedOp:
    """Per-block cache of compiled forwards, keyed by call signature.

    It watches the blocks and parameters of its block's tree: a structural change to any of
    them (see :mod:`hybrid._watch`) clears it, and with it every recorded program using it."""

    def __init__(self, block: Any, passes: Sequence[str], remat: Any = None):
        self.block = block
        self.passes = tuple(passes)
        self.remat = remat
        self.entries: dict[tuple, CompiledForward] = {}
        self.warned = False  # about compiling for too many input signatures
        LIVE_CACHES.add(self)

    def invalidate(self) -> None:
        for entry in self.entries.values():
            _lazy.forget_token(entry.token)
        self.entries = {}

    def entry(self, args: tuple) -> tuple[CompiledForward, list]:
        """The compiled forward for ``args`` (traced on first use) and the array leaves of ``args``."""
        leaves, treedef = jax.tree_util.tree_flatten(args)
        parts, arrays = signature(leaves)
        key = (treedef, _context.current().training, parts, precision.current())
        entry = self.entries.get(key)
        if entry is None:
            described = compile_log.describe(parts) + (" training" if key[1] else "")
            with _lazy.eval_trace(), compile_log.timed(f"traced {compile_log.name_of(self.block)}", described):
                # tracing and passes run on their own, whatever is being recorded
                entry = CompiledForward(trace_block(self.block, args), self.passes, self.remat)
            entry.signature = described
            self.entries[key] = entry
            weakref.finalize(self, _lazy.forget_token, entry.token)  # recorded programs calling it go with it
            if not self.warned:
                self.warned = compile_log.warn_if_recompiling(self.block, [e.signature for e in self.entries.values()])
            blocks: list = []
            self.block.apply(blocks.append)
            watch(self, blocks + unique_params(self.block.collect_params()))
        return entry, arrays

    def __call__(self, args: tuple) -> Any:
        entry, arrays = self.entry(args)
        frame = _context.current().frame
        if frame is not None:
            return self._call_in_frame(entry, arrays, frame)
        rng = (_random.base_key(), _random.next_counter()) if entry.uses_rng else ()
        arrays = [_lazy.concrete(a) for a in entry.with_attributes(arrays)]
        with state_lock:
            state_values, other_values = entry.current_values()
            if entry.ran:
                outputs, states = entry.run_eager(state_values, other_values, arrays, rng)
            else:
                with compile_log.timed(f"compiled {compile_log.name_of(self.block)}", entry.signature):
                    outputs, states = entry.run_eager(state_values, other_values, arrays, rng)
                entry.ran = True
            del state_values
            entry.write_states(states, _set_param_data)
        return jax.tree_util.tree_unflatten(entry.out_tree, outputs)

    def record(self, args: tuple) -> Any:
        """The call inside ``record()``: one node on the tape."""
        entry, arrays = self.entry(args)
        ctx = _context.current()
        frame = ctx.frame
        if entry.uses_rng:
            rng = (frame.next_key(), np.uint32(0)) if frame is not None else (_random.base_key(),
                                                                              _random.next_counter())
        else:
            rng = ()
        outputs, states = entry.record(ctx.tape, entry.with_attributes(arrays), rng)
        entry.write_states(states, Parameter.set_data)
        return jax.tree_util.tree_unflatten(entry.out_tree, outputs)

    def _call_in_frame(self, entry: CompiledForward, arrays: list, frame: _functional.Frame) -> Any:
        rng = (frame.next_key(), np.uint32(0)) if entry.uses_rng else ()
        hoisted = entry.infer if isinstance(entry.infer, _HoistedInfer) else None
        prepared = None
        ctx = _context.current()
        if hoisted is not None and isinstance(frame, _functional.CompileFrame) and not ctx.recording:
            # inference inside hybrid.compile: the parameter-only work comes from the hoisted program's
            # cache, as a value read at every call, instead of being redone by every call of the step
            params = entry.params
            prepared = frame.read_derived(("prepared", hoisted), [("data", p) for p in params],
                                          lambda: hoisted.prepared_for([p._data for p in params]))
        param_values, inputs = [p.data() for p in entry.params], entry.with_attributes(arrays)
        if prepared is not None:
            outputs, states = hoisted.main(param_values, prepared, inputs, rng)
        elif ctx.recording or ctx.training:  # differentiated: the rematerialised graph, if any
            outputs, states = entry.train_in_frame(param_values, inputs, rng)
        else:
            outputs, states = entry.infer_in_frame(param_values, inputs, rng)
        entry.write_states(states, Parameter.set_data)
        return jax.tree_util.tree_unflatten(entry.out_tree, outputs)


def data_input_names(n: int) -> list[str]:
    """The names of a graph's ``n`` data inputs, as Gluon's export gives them: ``data`` for one,
    ``data0``, ``data1``, ... for several."""
    return ["data"] if n == 1 else [f"data{i}" for i in range(n)]


def _set_param_data(param: Parameter, value: Any) -> None:
    param._assign(value)


class _HoistedInfer:
    """The inference entry point of a graph with parameter-only work (folded BatchNorm, weights moved
    to the kernel's layout): that work runs in its own program when the parameter arrays change,
    and its results are kept (with references to the arrays they came from) for later calls."""

    def __init__(self, entry: CompiledForward, split: hoist.HoistedGraphs):
        prepare, main = lower_graph(split.prepare, inline=True), lower_graph(split.main, inline=True)
        n_out, uses_rng = entry.n_outputs, entry.uses_rng

        def run(param_values, prepared, input_values, rng):
            results = main(*param_values, *prepared, *input_values, *(rng if uses_rng else ()))
            return results[:n_out], results[n_out:]

        self.prepare = jax.jit(lambda param_values: prepare(*param_values))
        self.main = jax.jit(run)
        self._source: tuple = ()  # weak references: holding the arrays would keep a training step
        self._prepared: list = []  # from reusing their buffers (and change its program)

    def prepared_for(self, param_values: list) -> list:
        """The results of the parameter-only work on ``param_values`` (computed when they changed)."""
        source = self._source
        if len(source) != len(param_values) or not all(ref() is value for ref, value in zip(source, param_values)):
            with _lazy.eval_trace():  # concrete results, also when asked while a step is traced
                self._prepared = self.prepare(param_values)
            self._source = tuple(map(weakref.ref, param_values))
        return self._prepared

    def __call__(self, state_values: list, param_values: list, input_values: list, rng: tuple) -> tuple:
        return self.main(param_values, self.prepared_for(param_values), input_values, rng)
