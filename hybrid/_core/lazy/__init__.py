"""Lazy recording of JAX computations: the one package that uses JAX internals (``jax._src``).

Inside ``autograd.record()`` every JAX operation on a recorded value (a block output, a
``jax.numpy`` call, an operator, ``p.data()``) is *staged* on a :class:`Tape` instead of being
run: the result is a :class:`LazyArray`, a JAX tracer that knows its shape and dtype.
The tape is compiled and run as one XLA program when Python needs a value (``float``,
``print``, ``np.asarray``, ``if``, any use outside ``record()``) or at the step boundary
(``trainer.step``), so forward, loss, backward and update of a step become one program.
Compiled programs are cached by a structural key built while recording (operation and
parameters, input shapes and dtypes, which value feeds which), never by hashing a jaxpr.

Gradients are nodes of the tape too (:meth:`Tape.grad`): replaying the tape differentiates
the prefix that precedes each gradient node with ``jax.vjp``, which also gives gradients
of gradients (``create_graph``).

Modules, each with one job:

- :mod:`.trace`: :class:`LazyArray` and :class:`LazyTrace`, and JAX's trace state;
- :mod:`.slots`: the slot registry (inputs, node outputs, the structural key);
- :mod:`.recording`: nodes, parameter reads, dependencies, freed graphs;
- :mod:`.effects`: pending writes, donation, packed outputs;
- :mod:`.programs`: evaluating nodes, compiling, the program cache;
- :mod:`.tape`: :class:`Tape`, which coordinates them, and stages optimizer updates.
"""
from .effects import PACK_BELOW_BYTES, Cell, PackRef, is_member, pack_of, resolve
from .programs import _LAST_RUN as _LAST_RUN, _PROGRAMS as _PROGRAMS, MAX_PROGRAMS, Stats, cached_programs, forget_token
from .tape import Tape, open_tape
from .trace import (
    SUPPORTED_JAX,
    ArrayImpl,
    LazyArray,
    LazyTrace,
    Tracer,
    check_jax_version,
    concrete,
    current_trace,
    eval_trace,
    parent_trace,
    recording_trace,
    set_backward_engine,
    set_trace,
    staged_out,
    under_transform,
)

__all__ = ["LazyArray", "Tape", "concrete", "resolve", "is_member", "pack_of", "open_tape", "check_jax_version",
           "SUPPORTED_JAX", "Cell", "PackRef", "Stats", "forget_token", "cached_programs", "PACK_BELOW_BYTES",
           "recording_trace", "parent_trace", "eval_trace", "current_trace", "under_transform", "staged_out",
           "set_trace", "set_backward_engine", "ArrayImpl", "Tracer", "LazyTrace", "MAX_PROGRAMS"]
