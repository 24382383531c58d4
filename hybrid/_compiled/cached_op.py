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
from collections import OrderedDict
from typing import Any, Callable, Sequence

import jax
import numpy as np

from .._core import cells as _cells, context as _context, functional as _functional, lazy as _lazy, stream as _stream
from . import structure as _structure
from .. import compile_log
from .._core.cells import Cell
from .._core.state_lock import state_lock
from .._core.watch import watch
from ..errors import HybridizeError
from ..graph._lower import lower as lower_graph
from ..graph import hoist, pipeline, precision
from .._core.memory_report import xla_bytes
from ..graph.target import compiler_options
from ..graph.ir import Graph
from ..graph.memory import remat
from ..graph._trace import from_jaxpr
from ..parameter import Parameter, data_of, unique_params

_TRACER_ERRORS = (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
                  jax.errors.TracerIntegerConversionError)
LIVE_CACHES: "weakref.WeakSet[CachedOp]" = weakref.WeakSet()  # for inspect.compile_caches
_TOKENS = itertools.count()  # names a CompiledForward in recorded programs' keys


# the usual types first: isinstance(x, jax.Array) asks jax.Array's metaclass, 0.37 us for a recorded value
# against 0.04 us for the type lookup (timeit)
_ARRAY_TYPES = frozenset({_lazy.ArrayImpl, _lazy.LazyArray, np.ndarray})


def is_array(x: Any) -> bool:
    return type(x) in _ARRAY_TYPES or isinstance(x, (jax.Array, np.ndarray))


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
    closed = jax.make_jaxpr(fn)(data_of(params), list(arrays) + attr_values, rng)
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
    from ..graph.passes.dce import dce
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


def _merge(state_index: Sequence[int], other_index: Sequence[int], state_values: Sequence,
           other_values: Sequence) -> list:
    """Parameter values in graph order from the state and non-state lists."""
    values = [None] * (len(state_index) + len(other_index))
    for i, v in zip(state_index, state_values):
        values[i] = v
    for i, v in zip(other_index, other_values):
        values[i] = v
    return values


class Program:
    """One traced and optimised forward and its jitted entry points, positional in its parameters.

    It holds no block or parameter: :class:`CompiledForward` binds it to the parameters and blocks of
    one tree, so structurally equal blocks share it (see :mod:`hybrid._compiled.structure`). Its ``token``
    names it in recorded programs' keys; they are released when it is."""

    def __init__(self, traced: TraceResult, passes: Sequence[str], remat: Any = None):
        self.signature = ""  # the input signature as text, for log lines
        self.ran = False  # whether the eager entry point has run (compiled) yet
        self.paths: _structure.Paths | None = None  # where its objects are in a tree, when bindable
        self.shared_key: tuple | None = None  # its key among the programs shared by structure
        self.users: "weakref.WeakSet[CachedOp]" = weakref.WeakSet()  # the caches holding it
        self.out_tree = traced.out_tree
        self.uses_rng = traced.uses_rng
        self.traced_graph = traced.graph
        self.n_outputs = traced.n_outputs
        self.n_params = len(traced.params)
        self.param_specs = [(tuple(p.own_data.shape), np.dtype(p.own_data.dtype)) for p in traced.params]
        self.diff_index = [i for i, p in enumerate(traced.params) if p.grad_req != "null"]
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
        written = {id(p) for p in traced.state_params}
        state_index = self.state_index = [i for i, p in enumerate(traced.params) if id(p) in written]
        other_index = self.other_index = [i for i, p in enumerate(traced.params) if id(p) not in written]

        def infer(state_values, other_values, input_values, rng):
            return forward(_merge(state_index, other_index, state_values, other_values), input_values, rng)

        split = None if state_index else hoist.split_parameter_work(self.graph, self.n_params)
        self.infer = jax.jit(infer) if split is None else _HoistedInfer(self, split)
        self._infer_donating = jax.jit(infer, donate_argnums=(0,)) if state_index else None
        self.infer_in_frame = jax.jit(forward)  # inside other traces: no donation, one nested call
        self.train_in_frame = self.infer_in_frame if self.train_forward is forward else jax.jit(self.train_forward)
        self.token = next(_TOKENS)
        weakref.finalize(self, _lazy.forget_token, self.token)  # recorded programs calling it go with it
        self._out_avals = traced.out_avals
        self._param_avals = [jax.core.ShapedArray(shape, dtype) for shape, dtype in self.param_specs]

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
        diff = self.diff_index
        n_params = self.n_params
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
        weights = self.graph.inputs[:self.n_params]
        graph, plan, details = remat.choose_plan(self.graph, spec, weights, self.training_memory)
        self.pass_stats.append(pipeline.PassStat("remat", len(self.graph), len(graph),
                                                 time.perf_counter() - start, details))
        self.train_graph, self.remat_plan = graph, plan

    def bind(self, root: Any) -> "CompiledForward | None":
        """This program bound to the objects of ``root``'s tree at its paths, or None when they are not
        all there with the shapes and dtypes it was traced for."""
        found = self.paths.resolve(root) if self.paths is not None else None
        if found is None:
            return None
        params = found[0]
        for param, (shape, dtype) in zip(params, self.param_specs):
            data = param.own_data
            if data is None or tuple(data.shape) != shape or data.dtype != dtype:
                return None
        return CompiledForward.bound(self, *found)


class CompiledForward:
    """A :class:`Program` bound to the parameters and blocks of one tree: what a call reads and writes.

    ``CompiledForward(traced, passes, remat)`` traces a new program for the objects of ``traced``;
    attributes not set here (``graph``, ``train_graph``, ``pass_stats``...) are the program's."""

    def __init__(self, traced: TraceResult, passes: Sequence[str], remat: Any = None):
        self._bind(Program(traced, passes, remat), traced.params, traced.state_params, traced.attributes,
                   traced.attr_inputs)

    @classmethod
    def bound(cls, program: Program, params: list, state_params: list, attributes: list,
              attr_inputs: list) -> "CompiledForward":
        """``program`` bound to these objects (in the order of the tree it was traced from)."""
        entry = cls.__new__(cls)
        entry._bind(program, params, state_params, attributes, attr_inputs)
        return entry

    def _bind(self, program: Program, params: list, state_params: list, attributes: list,
              attr_inputs: list) -> None:
        self.program = program
        self.params, self.state_params = params, state_params
        self.attributes, self.attr_inputs = attributes, attr_inputs
        self.state_inputs = [params[i] for i in program.state_index]
        self.other_inputs = [params[i] for i in program.other_index]
        # read on every call: copied rather than looked up through the program
        self.out_tree, self.uses_rng, self.n_outputs = program.out_tree, program.uses_rng, program.n_outputs
        self.token, self.infer, self.run_eager = program.token, program.infer, program.run_eager
        self.infer_in_frame, self.train_in_frame = program.infer_in_frame, program.train_in_frame

    def __getattr__(self, name: str) -> Any:
        if name == "program":  # not bound yet
            raise AttributeError(name)
        return getattr(self.program, name)

    @property
    def signature(self) -> str:
        return self.program.signature

    @property
    def ran(self) -> bool:
        return self.program.ran

    def current_values(self) -> tuple[list, list]:
        """The parameters' arrays as (state, non-state) lists, the form the jitted entry points take."""
        return data_of(self.state_inputs), data_of(self.other_inputs)

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

    def record(self, mode: Any, arrays: list, rng: tuple) -> tuple[list, list]:
        """Stage one call on the tape of the recording ``mode``; returns lazy (outputs, states)."""
        params, program, tape = self.params, self.program, mode.tape
        # the entry implies the parameters' shapes and dtypes
        param_slots = mode.record_params(params, program._param_avals, data_of)
        rest = list(arrays) + list(rng)
        slots = list(param_slots) + tape.slots_of(rest, False)
        n_params, n_arrays, n_out, forward = len(params), len(arrays), self.n_outputs, program.train_forward

        def call(*flat_values):
            p, rest = flat_values[:n_params], flat_values[n_params:]
            outputs, states = forward(p, rest[:n_arrays], rest[n_arrays:])
            return list(outputs) + list(states)

        results = tape.call(call, self.token, None, program._out_avals, token=self.token, slots=slots)
        return results[:n_out], results[n_out:]


# Programs by structure (see hybrid._compiled.structure): a block finds the program of an equal block, alive or
# made recently (a block created inside every training step finds the previous step's).
_SHARED: "OrderedDict[tuple, Program]" = OrderedDict()
MAX_SHARED = 512


def _share(key: tuple, program: Program) -> None:
    program.shared_key = key
    _SHARED[key] = program
    while len(_SHARED) > MAX_SHARED:
        _SHARED.popitem(last=False)


def release_unused() -> int:
    """Release the programs kept for sharing that no live block holds, with the recorded programs calling
    them; returns how many were released."""
    unused = [key for key, program in list(_SHARED.items()) if not program.users]
    for key in unused:
        program = _SHARED.pop(key, None)
        if program is not None:
            _lazy.forget_token(program.token)
    return len(unused)


def _release(program: Program, user: "CachedOp") -> None:
    """``user`` no longer holds ``program``: a program no other cache holds is released now, with the
    recorded programs calling it (a structural change ends it; a block that is only dropped, such as
    one made inside a step, leaves it for the next equal block)."""
    program.users.discard(user)
    if program.users:
        return
    if program.shared_key is not None and _SHARED.get(program.shared_key) is program:
        del _SHARED[program.shared_key]
    _lazy.forget_token(program.token)


class CachedOp:
    """Per-block cache of compiled forwards, keyed by call signature.

    A forward is looked up by the block's structure first (:mod:`hybrid._compiled.structure`): an equal
    block's program is bound to this block's parameters, so equal blocks trace and compile once.
    It watches the blocks and parameters of its block's tree: a structural change to any of
    them (see :mod:`hybrid._core.watch`) clears it, and the next call looks up the new structure."""

    forward_only = True  # a parameter's optimizer multipliers do not concern it (see hybrid._core.watch)

    def __init__(self, block: Any, passes: Sequence[str], remat: Any = None):
        # weak: the block holds its cache, and a cycle would keep both (and the programs they hold) until
        # Python's garbage collector runs
        self._block = weakref.ref(block)
        self.passes = tuple(passes)
        self.remat = remat
        self.entries: dict[tuple, CompiledForward] = {}
        self.warned = False  # about compiling for too many input signatures
        LIVE_CACHES.add(self)

    @property
    def block(self) -> Any:
        """The block whose calls this caches (None once it is gone)."""
        return self._block()

    def invalidate(self) -> None:
        for entry in self.entries.values():
            _release(entry.program, self)
        self.entries = {}

    def entry(self, args: tuple) -> tuple[CompiledForward, list]:
        """The compiled forward for ``args`` (traced on first use) and the array leaves of ``args``."""
        leaves, treedef = jax.tree_util.tree_flatten(args)
        parts, arrays = signature(leaves)
        key = (treedef, _context.current().training, parts, precision.current())
        entry = self.entries.get(key)
        if entry is None:
            entry = self._new_entry(key, args)
        return entry, arrays

    def _shared_key(self, key: tuple) -> tuple | None:
        structure = _structure.structure_key(self.block)
        if structure is None:
            return None
        options = _structure.plain_key((self.passes, self.remat))
        return None if options is None else (structure, options, key)

    def _new_entry(self, key: tuple, args: tuple) -> CompiledForward:
        block = self.block
        _context.current().mode.before_trace(self, args)
        shared_key = self._shared_key(key)
        program = _SHARED.get(shared_key) if shared_key is not None else None
        entry = program.bind(block) if program is not None else None
        if entry is not None:
            if _SHARED.get(shared_key) is program:  # (another thread may have released it since)
                _SHARED.move_to_end(shared_key)
            compile_log.log.debug("%s shares the compiled forward of an equal block for %s",
                                  compile_log.name_of(block), program.signature)
        else:
            described = compile_log.describe(key[2]) + (" training" if key[1] else "")
            with _lazy.eval_trace(), compile_log.timed(f"traced {compile_log.name_of(block)}", described):
                # tracing and passes run on their own, whatever is being recorded
                traced = trace_block(block, args)
                after = self._shared_key(key)
                if shared_key is None:  # parameters with deferred shapes were initialised by the trace
                    shared_key = after
                    program = _SHARED.get(shared_key) if shared_key is not None else None
                    entry = program.bind(block) if program is not None else None
                elif after != shared_key:  # the trace changed the block: an equal block's would too
                    shared_key = None
                if entry is None:
                    entry = CompiledForward(traced, self.passes, self.remat)
                    entry.program.signature = described
                    if shared_key is not None:
                        entry.program.paths = _structure.paths_of(block, traced.params, traced.state_params,
                                                                  traced.attributes, traced.attr_inputs)
                        if entry.program.paths is not None:
                            _share(shared_key, entry.program)
        self.entries[key] = entry
        entry.program.users.add(self)
        if not self.warned:
            self.warned = compile_log.warn_if_recompiling(block, [e.signature for e in self.entries.values()])
        blocks: list = []
        block.apply(blocks.append)
        watch(self, blocks + unique_params(block.collect_params()))
        return entry

    def init_deferred(self, args: tuple) -> None:
        """Before tracing outside frames: a leaf block's parameters that wait for their shapes are
        initialised as the trace would (shapes from the inputs, then the initialisers), concretely."""
        block = self.block
        if _structure.deferred_leaf(block):
            with _lazy.eval_trace():
                block._init_deferred(*args)

    def __call__(self, args: tuple) -> Any:
        entry, arrays = self.entry(args)
        return _context.stack.top.mode.run_cached(self, entry, arrays)

    # -- how each mode runs an entry (hybrid._core.modes.Mode.run_cached) --
    def _run_eager(self, entry: CompiledForward, arrays: list) -> Any:
        rng = (_stream.base_key(), _stream.next_counter()) if entry.uses_rng else ()
        arrays = [_lazy.concrete(a) for a in entry.with_attributes(arrays)]
        with state_lock:
            state_values, other_values = entry.current_values()
            program = entry.program
            if program.ran:
                outputs, states = entry.run_eager(state_values, other_values, arrays, rng)
            else:
                with compile_log.timed(f"compiled {compile_log.name_of(self.block)}", entry.signature):
                    outputs, states = entry.run_eager(state_values, other_values, arrays, rng)
                program.ran = True
            del state_values
            entry.write_states(states, _set_param_data)
        return jax.tree_util.tree_unflatten(entry.out_tree, outputs)

    def _run_recorded(self, entry: CompiledForward, arrays: list, mode: Any) -> Any:
        rng = mode.program_rng() if entry.uses_rng else ()
        outputs, states = entry.record(mode, entry.with_attributes(arrays), rng)
        entry.write_states(states, Parameter.set_data)
        return jax.tree_util.tree_unflatten(entry.out_tree, outputs)

    def _call_in_frame(self, entry: CompiledForward, arrays: list, frame: _functional.Frame) -> Any:
        rng = frame.program_rng() if entry.uses_rng else ()
        hoisted = entry.infer if isinstance(entry.infer, _HoistedInfer) else None
        prepared = None
        if hoisted is not None:
            # inference inside hybrid.compile: the parameter-only work comes from the hoisted program's
            # cache, as a value read at every call, instead of being redone by every call of the step
            params = entry.params
            prepared = frame.read_derived(Cell(_cells.PREPARED, hoisted, tuple(params)),
                                          [Cell(_cells.DATA, p) for p in params],
                                          lambda: hoisted.prepared_for(data_of(params)))
        param_values, inputs = [p.data() for p in entry.params], entry.with_attributes(arrays)
        if prepared is not None:
            outputs, states = hoisted.main(param_values, prepared, inputs, rng)
        elif _context.current().training:  # differentiated: the rematerialised graph, if any
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
    param.assign_data(value)


class _HoistedInfer:
    """The inference entry point of a graph with parameter-only work (folded BatchNorm, weights moved
    to the kernel's layout): that work runs in its own program when the parameter arrays change,
    and its results are kept (with references to the arrays they came from) for later calls: for the
    last few parameter lists, as blocks of equal structure share it."""

    KEEP = 4  # parameter lists whose results are kept

    def __init__(self, program: Program, split: hoist.HoistedGraphs):
        prepare, main = lower_graph(split.prepare, inline=True), lower_graph(split.main, inline=True)
        n_out, uses_rng = program.n_outputs, program.uses_rng

        def run(param_values, prepared, input_values, rng):
            results = main(*param_values, *prepared, *input_values, *(rng if uses_rng else ()))
            return results[:n_out], results[n_out:]

        self.prepare = jax.jit(lambda param_values: prepare(*param_values))
        self.main = jax.jit(run)
        # (weak references to the source arrays, results), most recent first: holding the arrays would
        # keep a training step from reusing their buffers (and change its program)
        self._kept: list[tuple[tuple, list]] = []

    def prepared_for(self, param_values: list) -> list:
        """The results of the parameter-only work on ``param_values`` (computed when they changed)."""
        kept = self._kept
        for at, (source, prepared) in enumerate(kept):
            if len(source) == len(param_values) and all(ref() is value for ref, value in zip(source, param_values)):
                if at:
                    kept.insert(0, kept.pop(at))
                return prepared
        with _lazy.eval_trace():  # concrete results, also when asked while a step is traced
            prepared = self.prepare(param_values)
        alive = [item for item in kept if all(ref() is not None for ref in item[0])]
        self._kept = [(tuple(map(weakref.ref, param_values)), prepared)] + alive[:self.KEEP - 1]
        return prepared

    def __call__(self, state_values: list, param_values: list, input_values: list, rng: tuple) -> tuple:
        return self.main(param_values, self.prepared_for(param_values), input_values, rng)
