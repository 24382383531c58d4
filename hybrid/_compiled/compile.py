"""``hybrid.compile``: a whole imperative training step as ONE XLA program.

    @hybrid.compile
    def train_step(x, y):
        with autograd.record():
            loss = loss_fn(net(x), y)
        autograd.backward(loss)
        trainer.step(x.shape[0])
        return loss

The step is traced with every piece of state it touches virtualised (see
:class:`hybrid._core.functional.CompileFrame`): parameter data, gradients, optimizer
states, BatchNorm statistics. Tracing runs until the set of touched state is
stable; the state then becomes inputs and outputs of one jitted program whose
updated buffers are donated. Each call gathers the current state, computes
host inputs (learning rate, random counter), runs the program and writes the
new state back, so Python code outside the step sees ordinary Parameters.
"""
from __future__ import annotations

import functools
import weakref
from typing import Any, Callable

import jax

from .._core import context as _context, functional as _functional, lazy as _lazy
from .. import compile_log
from .._core import memory_report
from ..graph.target import compiler_options
from .._core.watch import watch
from ..parameter import assign_all, data_of
from .._core.cells import DATA, GRAD
from .cached_op import _TRACER_ERRORS, ArgSpec, signature
from ..graph import precision
from ..errors import CompileError

__all__ = ["compile", "CompiledStep"]


LIVE_STEPS: "weakref.WeakSet[CompiledStep]" = weakref.WeakSet()  # for inspect.compile_caches


class _Program:
    """One traced step for one input signature.

    Its state inputs and writes are cells in the order the program takes them, those of parameter
    data first: these are read and written for all parameters at once (``data_of``/``assign_all``),
    the other cells one getter or setter each.
    """

    def __init__(self, jitted: Callable, donated: list, kept: list, host: list, written: list,
                 info: dict, fresh: dict, dropped: list):
        self.jitted = jitted
        self.donated_params, self.donated_getters = _split_data_cells(donated)
        self.kept_params, self.kept_getters = _split_data_cells(kept)
        self.host_computes = [compute for compute, _, _ in host]
        self.written_params, setters = _split_data_cells(written)
        self.setters = [setter for _, setter in setters]
        self.info = info  # the output structure is recorded here when the program is first traced
        self.fresh = list(fresh.items())
        self.dropped = dropped
        self.signature = ""  # the input signature as text, for log lines
        self.memory: list = []  # its record in the memory report, made at the first run

    def state_inputs(self) -> tuple[list, list, list]:
        """The program's inputs besides the step's arguments: the donated cells' values, the kept
        cells' values and the host values, read now."""
        donated = data_of(self.donated_params)
        donated += [getter() for getter in self.donated_getters]
        kept = data_of(self.kept_params)
        kept += [getter() for getter in self.kept_getters]
        return donated, kept, [compute() for compute in self.host_computes]

    def run(self, arrays: list) -> Any:
        donated, kept, host = self.state_inputs()
        if self.memory:
            self.memory[0].note_run()
        else:
            memory_report.track("compiled step", self.jitted, (donated, kept, arrays, host), self.memory)
        outputs, writes = self.jitted(donated, kept, arrays, host)
        n = len(self.written_params)
        assign_all(self.written_params, writes[:n])
        for setter, value in zip(self.setters, writes[n:]):
            setter(value)
        for param, fresh in self.fresh:
            param.grad_state.fresh = fresh
        for param in self.dropped:
            param.grad_state.drop()
        return jax.tree_util.tree_unflatten(self.info["out_tree"], outputs)


def _data_first(cells: list) -> list:
    """``(cell key, x)`` pairs with the parameters' data cells first (a stable order otherwise)."""
    return sorted(cells, key=lambda item: item[0].kind != DATA)


def _split_data_cells(cells: list) -> tuple[list, list]:
    """The parameters of the leading data cells of ``(cell key, x)`` pairs, and the ``x`` of the rest."""
    n = next((i for i, (key, _) in enumerate(cells) if key.kind != DATA), len(cells))
    return [key.owner for key, _ in cells[:n]], [x for _, x in cells[n:]]


class CompiledStep:
    """A step function compiled per input signature (see :func:`compile`)."""

    def __init__(self, fn: Callable, keep_grads: bool = False, donate: bool = True):
        self._fn = fn
        self._keep_grads = keep_grads
        self._donate = donate
        self._programs: dict[tuple, _Program] = {}
        self._warned = False  # about compiling for too many input signatures
        functools.update_wrapper(self, fn)
        LIVE_STEPS.add(self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        packed = (args, kwargs)
        leaves, treedef = jax.tree_util.tree_flatten(packed)
        parts, arrays = signature(leaves)
        ctx = _context.current()
        key = (treedef, parts, ctx.training, ctx.mode.recording, precision.current())
        program = self._programs.get(key)
        if program is not None:
            return program.run(arrays)
        described = compile_log.describe(parts)
        with compile_log.timed(f"compiled step {compile_log.name_of(self._fn)}", described):
            program = self._build(ArgSpec(leaves, treedef), arrays)
            program.signature = described
            out = program.run(arrays)
        self._programs[key] = program
        if not self._warned:
            self._warned = compile_log.warn_if_recompiling(self._fn, [p.signature for p in self._programs.values()])
        return out

    def invalidate(self) -> None:
        """A block or parameter the step uses changed structurally: trace again at the next call."""
        self._programs = {}

    @property
    def num_programs(self) -> int:
        """How many input signatures have been compiled."""
        return len(self._programs)

    def _trace(self, spec: ArgSpec, arrays: list, cell_keys: list, host_keys: list, info: dict) -> Callable:
        """The step as a function of (cell values, input arrays, host values)."""
        name = getattr(self._fn, "__name__", "step")

        def traced(cell_values, input_values, host_values):
            frame = _functional.CompileFrame(dict(zip(cell_keys, cell_values)), dict(zip(host_keys, host_values)))
            try:
                call_args, call_kwargs = spec.rebuild(input_values)
                with _functional.activate_compile_frame(frame):
                    out = self._fn(*call_args, **call_kwargs)
            except _TRACER_ERRORS as exc:
                raise CompileError(
                    f"hybrid.compile: {name} uses the value of an array in Python (if/while, bool(), float(), "
                    ".item(), NumPy conversion, printing) but inside a compiled step arrays are symbolic. Return "
                    "the value from the step and inspect it outside, or use jnp.where / jax.lax.cond. "
                    f"({type(exc).__name__})") from exc
            leaves, out_tree = jax.tree_util.tree_flatten(out)
            for leaf in leaves:
                if not isinstance(leaf, jax.Array):
                    raise CompileError(f"hybrid.compile: {name} returned a {type(leaf).__name__}; a compiled step "
                                       "returns arrays (or tuples/lists/dicts of arrays) or None")
            info.update(frame=frame, out_tree=out_tree)
            # recorded values still pending are computed here, inside the step's trace
            return ([_lazy.concrete(leaf) for leaf in leaves],
                    [jax.tree_util.tree_map(_lazy.concrete, frame.writes.get(k)) for k in info.get("written", ())])
        return traced

    def _build(self, spec: ArgSpec, arrays: list) -> _Program:
        """Trace the step to find the state it touches, then trace the program taking that state as
        inputs; when the second trace finds more (state read only on some path), trace again."""
        cells: dict = {}   # key -> getter, for state read before written
        host: dict = {}    # key -> (compute, shape, dtype)
        info: dict = {"written": []}
        jax.eval_shape(self._trace(spec, arrays, [], [], info), [], arrays, [])
        frame = info["frame"]
        for _attempt in range(6):
            cells.update(frame.missing_cells)
            host.update(frame.missing_host)
            program, final = self._program_for(spec, arrays, cells, host, frame)
            if not final.missing_cells and not final.missing_host and final.setters.keys() == frame.setters.keys():
                return program
            frame = final
        raise CompileError("hybrid.compile: the state touched by the step kept changing between traces")

    def _program_for(self, spec: ArgSpec, arrays: list, cells: dict, host: dict,
                     frame: _functional.CompileFrame) -> tuple[_Program, _functional.CompileFrame]:
        """The jitted step reading ``cells`` and ``host`` values and writing what ``frame`` wrote,
        traced (not compiled); and the frame of that trace."""
        written = [(k, v) for k, v in frame.setters.items() if self._keep_grads or not _dropped_grad(k)]
        dropped = [k.owner for k in frame.setters if not self._keep_grads and _dropped_grad(k)]
        written_keys = {k for k, _ in written}
        donated = _data_first([(k, g) for k, g in cells.items() if self._donate and k in written_keys])
        kept = _data_first([(k, g) for k, g in cells.items() if not (self._donate and k in written_keys)])
        # outputs in the order of the donated inputs, so that each new value reuses its old buffer
        rank = {k: i for i, (k, _) in enumerate(donated)}
        written.sort(key=lambda item: (rank.get(item[0], len(rank)), item[0].kind != DATA))
        final_info = {"written": [k for k, _ in written]}
        traced = self._trace(spec, arrays, [k for k, _ in donated] + [k for k, _ in kept], list(host), final_info)

        def program(donated_values, kept_values, input_values, host_values):
            return traced(list(donated_values) + list(kept_values), input_values, host_values)

        jitted = jax.jit(program, donate_argnums=(0,) if donated else (),
                         compiler_options=None if _lazy.under_transform() else compiler_options())
        # traced here; the first call reuses this trace
        jitted.trace([g() for _, g in donated], [g() for _, g in kept], arrays,
                     [jax.ShapeDtypeStruct(shape, dtype) for _, shape, dtype in host.values()])
        final = final_info["frame"]
        params = {key.owner for key in list(cells) + list(final.setters) if key.kind in (DATA, GRAD)}
        watch(self, list(params) + list(final.watched))
        program = _Program(jitted, donated, kept, list(host.values()), written, final_info, dict(final.fresh), dropped)
        return program, final


def _dropped_grad(key: Any) -> bool:
    """Gradients of ``grad_req='write'`` parameters live only inside the step unless kept."""
    return key.kind == GRAD and key.owner.grad_req != "add"


def compile(fn: Callable | None = None, *, keep_grads: bool = False, donate: bool = True) -> Any:
    """Compile an imperative step (record / backward / trainer.step ...) into one XLA program.

    Args:
        fn: the step function; its arguments are arrays (traced) or hashable Python values
            (static: a new value compiles a new program, as does a new shape or dtype).
        keep_grads: also return gradients of ``grad_req='write'`` parameters, so that
            ``param.grad()`` works after a call (costs their memory and writes).
        donate: donate the buffers of state the step overwrites (parameters, optimizer
            states); arrays previously obtained from them become invalid.
    Returns a :class:`CompiledStep`; calling it runs the program and returns what ``fn`` returns.
    Raises CompileError (at the first call) for steps that cannot be compiled, e.g. Python
    control flow on array values.
    """
    if fn is None:
        return functools.partial(compile, keep_grads=keep_grads, donate=donate)
    return CompiledStep(fn, keep_grads, donate)
