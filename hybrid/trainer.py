"""Trainer: applies an optimizer to a set of Parameters with one compiled, buffer-donating program."""
from __future__ import annotations

import functools
import itertools
import json
import operator
import sys
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
from jax.extend import core as jax_core
import numpy as np

from ._core import cells as _cells, compat as _compat, context as _context, functional as _functional
from ._core.cells import Cell
from . import optimizer as _opt
from .formats import serialization
from .distributed.mesh import make_mesh
from .distributed.placement import Placement, ShardingRules
from .errors import StaleGradientError
from ._core.state_lock import state_lock
from ._core.watch import watch
from .parameter import Parameter, assign_all, consume_grads, data_of, open_recording, unique_params

__all__ = ["Trainer"]


class UpdateProgram(NamedTuple):
    """The update ``(weights, grads, states, lr, rescale, scaler_state) -> (weights, states, scaler_state)``
    jitted three ways, and the overflow guard it applies (``hybrid.amp``), or None."""

    donating: Callable  # donates the weights and the states
    donating_states: Callable  # donates the states only (someone else holds a weight)
    plain: Callable  # donates nothing: staged on a recording, or traced inside hybrid.compile
    guard: Any


# MXNet's one-process key-value stores: with any of them (a name, or a store such as mx.kv.create('device')),
# the Trainer's own compiled update is what MXNet's store would compute on one process
_ONE_PROCESS_STORES = frozenset({"local", "device", "local_update_cpu", "local_allreduce_cpu",
                                 "local_allreduce_device", "nccl"})


def _one_process_store(kvstore: Any) -> bool:
    """Whether ``kvstore`` (None, a store's name or a store with a ``type``) names a one-process store."""
    if kvstore is None:
        return True
    name = kvstore if isinstance(kvstore, str) else getattr(kvstore, "type", None)
    return isinstance(name, str) and name.lower() in _ONE_PROCESS_STORES


_LR_MULT = operator.attrgetter("lr_mult")
_WD_MULT = operator.attrgetter("wd_mult")


class Trainer:
    """Updates ``params`` with ``optimizer`` after ``autograd.backward``.

    Args:
        params: dict (e.g. ``net.collect_params()``) or list of Parameters.
        optimizer: a registered name (``'sgd'``, ``'adam'``) or an Optimizer instance.
        optimizer_params: keyword arguments for the optimizer when given by name.
        kvstore: Gluon's key-value store, a name (``'device'``, ``'local'``, ...) or a store
            (``mx.kv.create('device')``). One-process stores change nothing: the update is this
            Trainer's compiled program, not the store's. Any other value warns (see ``devices``).
        devices: train on several devices: a device count, a list of ``jax.Device`` or a
            ``Mesh`` (see ``hybrid.distributed.make_mesh``). Parameters and optimizer states
            are placed on the mesh (replicated unless ``sharding_rules`` split them); feed
            batches split with ``hybrid.distributed.shard_batch(x, trainer.mesh)``.
        mesh: a ``jax.sharding.Mesh``, instead of ``devices``.
        sharding_rules: a ``hybrid.distributed.ShardingRules`` (or its list of
            ``(regex, PartitionSpec)`` pairs) splitting large parameters over mesh axes.
        keep_grads: keep the gradients when a step runs as one program with the recorded
            forward and backward, so that ``p.grad()`` reads them after ``step`` (Gluon's
            behaviour). False saves a gradient buffer the size of the parameters; ``p.grad()``
            then raises until the next ``backward``. Reading gradients before ``step`` (the
            split step) works either way.

    ``step(batch_size)`` rescales gradients by ``1 / batch_size`` and updates every
    parameter with ``grad_req != 'null'`` in ONE compiled program. When ``backward`` was
    recorded, that program also runs the recorded forward and backward. The buffers of old
    weights and states are reused for the new ones only when nothing else holds them, so an
    array taken from ``data()`` before a step keeps its values.
    """

    def __init__(self, params: Any, optimizer: str | _opt.Optimizer, optimizer_params: dict | None = None,
                 kvstore: Any = None, compression_params: Any = None, update_on_kvstore: Any = None,
                 devices: Any = None, mesh: Any = None, sharding_rules: ShardingRules | list | None = None,
                 keep_grads: bool = True):
        if not _one_process_store(kvstore):
            _compat.ignored_argument("Trainer", "kvstore", kvstore, "gradients are reduced by XLA's collectives "
                                     "over the devices of the mesh; see docs/distributed.md")
        if update_on_kvstore is not None:
            _compat.ignored_argument("Trainer", "update_on_kvstore", update_on_kvstore,
                                     "the update runs in the compiled step, on every device")
        if compression_params is not None:
            _compat.ignored_argument("Trainer", "compression_params", compression_params,
                                     "gradients are not compressed")
        if isinstance(params, dict):
            named = list(params.items())
        elif isinstance(params, (list, tuple)):
            for i, p in enumerate(params):
                if not isinstance(p, Parameter):
                    raise TypeError(f"Trainer: params must be Parameters (e.g. net.collect_params()), but item {i} "
                                    f"is of type {type(p).__name__}")
            named = [(p.name or f"param{i}", p) for i, p in enumerate(params)]
        else:
            raise TypeError(f"Trainer: params must be a dict (e.g. net.collect_params()) or a list of "
                            f"Parameters, got {type(params).__name__}")
        self._params = unique_params([p for _, p in named])
        self._names = {}
        for name, param in named:
            self._names.setdefault(param, name)
        if isinstance(optimizer, _opt.Optimizer):
            if optimizer_params:
                raise ValueError("Trainer: optimizer_params must be None when optimizer is an Optimizer instance")
            self._optimizer = optimizer
        else:
            self._optimizer = _opt.create(optimizer, **(optimizer_params or {}))
        self._scale = self._optimizer.rescale_grad
        self._keep_grads = bool(keep_grads)
        self._state_dict: dict[Parameter, tuple] = {}  # read through _states
        # (params, sizes, leaves): the states a recorded update stored last, flat, not yet in _state_dict
        self._flat_states: tuple | None = None
        self._update_programs: dict[tuple, Callable] = {}
        self._last_program: tuple | None = None  # (params, guard, program) of the last step
        self._flat_updates: dict[tuple, tuple] = {}
        self._device_scalars: dict[tuple, tuple] = {}
        self._loss_scaler: Any = None  # a hybrid.amp.LossScaler, set by hybrid.amp.init_trainer
        self._trainable_cache: list[Parameter] | None = None
        watch(self, [*self._params, self._optimizer])
        self._placement: Placement | None = None
        if devices is not None and mesh is not None:
            raise ValueError("Trainer: give devices or mesh, not both")
        if devices is not None or mesh is not None or sharding_rules is not None:
            self._placement = Placement([(p, self._names[p]) for p in self._params],
                                        make_mesh(mesh if mesh is not None else devices), sharding_rules)

    @property
    def _states(self) -> dict:
        """The optimizer state of each parameter, a tuple of arrays (the dict itself: compiled steps write
        into it). A recorded update stores its new states as one flat list, which the next recorded update
        of the same parameters takes as it is (mlp33's 68 momenta: 9.1 -> 0.5 us per step, timeit); they
        are put in the dict when something else reads it."""
        if self._flat_states is not None:
            self._fold_states()
        return self._state_dict

    def _fold_states(self) -> None:
        """Put the flat states of the last recorded update into the dict."""
        params, sizes, leaves = self._flat_states
        self._flat_states = None
        self._state_dict.update(zip(params, _group(leaves, sizes)))

    @property
    def learning_rate(self) -> float:
        return self._optimizer.learning_rate

    @property
    def optimizer(self) -> _opt.Optimizer:
        return self._optimizer

    @property
    def mesh(self) -> Any:
        """The ``jax.sharding.Mesh`` the parameters live on, or None (single device)."""
        return self._placement.mesh if self._placement is not None else None

    @property
    def placement(self) -> Placement | None:
        """Where the parameters and optimizer states live on the mesh, or None (single device)."""
        return self._placement

    @property
    def loss_scaler(self) -> Any:
        """The ``hybrid.amp.LossScaler`` of this trainer (set by ``amp.init_trainer``), or None."""
        return self._loss_scaler

    @loss_scaler.setter
    def loss_scaler(self, scaler: Any) -> None:
        self._loss_scaler = scaler

    def name_of(self, param: Parameter) -> str | None:
        """The structural name of ``param`` in this trainer, or None when it is not one of its parameters."""
        return self._names.get(param)

    def state_entries(self) -> list[tuple[str, Parameter, tuple | None]]:
        """``(structural name, parameter, optimizer state)`` for each parameter, in the trainer's order; the
        state is a tuple of arrays, or None before the parameter's first update."""
        states = self._states
        return [(self._names[p], p, states.get(p)) for p in self._params]

    def trainable_params(self) -> list[Parameter]:
        """The parameters ``step`` updates (``grad_req != 'null'``), in the trainer's order (a new list)."""
        return list(self._trainable())

    def set_learning_rate(self, lr: float) -> None:
        """Change the learning rate (takes effect at the next step, without recompiling)."""
        self._optimizer.set_learning_rate(lr)

    def invalidate(self) -> None:
        """A parameter's grad_req, dtype or multipliers, or a hyperparameter of the optimizer, changed:
        recompute the trainable set and programs."""
        self._trainable_cache = None
        self._update_programs = {}
        self._last_program = None
        self._flat_updates = {}

    def _trainable(self) -> list[Parameter]:
        params = self._trainable_cache
        if params is None:
            params = self._trainable_cache = [p for p in self._params if p.grad_req != "null"]
        return params

    def allreduce_grads(self) -> None:
        """Kept for Gluon code: gradients need no separate reduction. On a mesh, the compiled
        backward of a batch split over ``'data'`` already sums them with XLA collectives."""

    def step(self, batch_size: float, ignore_stale_grad: bool = False) -> None:
        """Rescale gradients by ``1 / batch_size`` and apply one optimizer update.

        Raises StaleGradientError when a parameter's gradient was not written by
        ``backward`` since the last step, unless ``ignore_stale_grad`` (then those
        parameters are skipped).
        """
        self.update(batch_size, ignore_stale_grad)

    def update(self, batch_size: float, ignore_stale_grad: bool = False) -> None:
        """Same as ``step`` (no separate all-reduce on one device)."""
        if not isinstance(batch_size, (int, float, np.integer, np.floating)):
            raise TypeError(f"Trainer.step: batch_size must be a Python number, got {type(batch_size).__name__} "
                            "(inside hybrid.compile use x.shape[0], which is static)")
        if batch_size <= 0:
            raise ValueError(f"Trainer.step: batch_size must be positive, got {batch_size}")
        trainable = self._trainable()
        store = _context.current().store
        active = store.fresh_grads(trainable)
        if len(active) != len(trainable):
            if not ignore_stale_grad:
                fresh = set(active)
                stale = [self._names[p] for p in trainable if p not in fresh]
                raise StaleGradientError(
                    f"Trainer.step: gradient of parameter(s) {stale[:10]}{'...' if len(stale) > 10 else ''} has "
                    "not been updated by backward since the last step. The model may use only some of its "
                    "parameters in this iteration; if that is intended, call step(batch_size, "
                    "ignore_stale_grad=True) to skip them.")
            if not active:
                if self._loss_scaler is not None:
                    self._loss_scaler.begin_step()  # the scaled gradients of this step are not used
                return
        rescale = self._rescale(batch_size)
        if self._placement is not None:
            self._placement.place_pending()  # parameters initialised at the first forward
        scaler = self._loss_scaler
        guard = scaler.begin_step() if scaler is not None else None
        store.apply_update(self, self._program(active, guard), active, rescale)

    def _rescale(self, batch_size: float) -> np.float32:
        """The factor every update multiplies the gradients by for ``batch_size``: the optimizer's
        ``rescale_grad`` at construction over ``batch_size`` (also set as its ``rescale_grad``, as in Gluon)."""
        self._optimizer.rescale_grad = self._scale / batch_size
        return np.float32(self._optimizer.rescale_grad)

    def update_now(self, program: UpdateProgram, active: list[Parameter], rescale: np.float32) -> None:
        """The update of ``step`` outside a compiled step (called by the current mode): ``program`` applied
        to ``active``, the parameters with fresh gradients, with the gradients multiplied by ``rescale``;
        staged on the recording that computed the gradients, or run at once on gradients that are arrays."""
        grads = [p.grad_state.value for p in active]
        recording = open_recording(grads)
        with state_lock:  # see hybrid._core.state_lock
            if recording is not None:
                self._update_recorded(recording, program, active, grads, rescale)
            else:
                self._update_eager(program, active, [p.grad_state.resolved() for p in active], rescale)

    def _scaler_state(self, program: UpdateProgram) -> tuple:
        """The loss scaler's state when ``program`` checks for overflow (hybrid.amp), else ()."""
        return self._loss_scaler.state() if program.guard is not None else ()

    def _update_eager(self, program: UpdateProgram, active: list[Parameter], grads: list,
                      rescale: np.float32) -> None:
        """The update as the trainer's own program, on gradients that are arrays."""
        lr = self._next_learning_rate()
        states = self._states_of(active)
        weights = data_of(active)
        # reuse the old weights' buffers unless someone besides the parameter holds one
        # (references: the parameter, `weights`, getrefcount's argument)
        donate = max(map(sys.getrefcount, weights), default=0) <= 3
        new_weights, new_states, scaler_state = (program.donating if donate else program.donating_states)(
            weights, grads, states, lr, rescale, self._scaler_state(program))
        del weights, grads
        assign_all(active, new_weights)
        self._states.update(zip(active, new_states))
        consume_grads(active)
        if scaler_state:
            self._loss_scaler.set_state(scaler_state)

    def _update_recorded(self, recording: Any, program: UpdateProgram, active: list[Parameter], grads: list,
                         rescale: np.float32) -> None:
        """The update staged on the recording that computed the gradients, which then runs the whole step
        as one program (old weights and states donated where nothing else holds them)."""
        lr = self._next_learning_rate()
        weights = data_of(active)
        n = len(active)
        last = self._flat_states
        if last is not None and last[0] is active:  # the states the last recorded update stored
            _, sizes, leaves = last
            flat_states = list(leaves)
        else:
            states = self._states_of(active)
            sizes = tuple([len(s) for s in states])
            flat_states = [leaf for state in states for leaf in state]
            del states  # the old state leaves are held by self._states only
        scaler_state = list(self._scaler_state(program))
        call, out_avals = self._flat_update(program, sizes, weights, flat_states + scaler_state)
        end, guarded = n + len(flat_states), bool(scaler_state)

        def store(values: list) -> None:
            assign_all(active, values[:n])
            self._flat_states = (active, sizes, values[n:end])  # (any earlier ones were of `active` too)
            if guarded:
                self._loss_scaler.set_state(values[end:])

        keep = self._keep_grads
        consume_grads(active, keep)
        recording.stage_update(self, call, (program.plain, sizes), weights, grads, flat_states,
                               scaler_state + list(self._on_device(lr, rescale)), out_avals, store, params=active,
                               drop_grads=() if keep else grads, drop_reason=_NOT_KEPT)

    def _on_device(self, *scalars: np.float32) -> tuple:
        """Hyperparameters as device arrays, kept while their values repeat (a host scalar would be
        copied to the device at every step)."""
        arrays = self._device_scalars.get(scalars)
        if arrays is None:
            if len(self._device_scalars) > 16:
                self._device_scalars.clear()
            arrays = self._device_scalars[scalars] = tuple(jax.device_put(scalars))
        return arrays

    def _flat_update(self, program: UpdateProgram, sizes: tuple, weights: list,
                     flat_states: list) -> tuple[Callable, list]:
        """The update as a function of flat arrays (weights, grads, state leaves, loss scaler state
        leaves, lr, rescale) returning (new weights, new state leaves, new loss scaler state leaves),
        and the shapes of its results (cached)."""
        key = (program.plain, sizes)
        cached = self._flat_updates.get(key)
        if cached is None:
            update, n = program.plain, len(sizes)
            n_leaves = sum(sizes)

            def call(*flat):
                weights, grads, rest = flat[:n], flat[n:2 * n], flat[2 * n:]
                states = list(_group(rest[:n_leaves], sizes))
                new_weights, new_states, scaler_state = update(list(weights), list(grads), states, rest[-2], rest[-1],
                                                               rest[n_leaves:-2])
                return list(new_weights) + [leaf for state in new_states for leaf in state] + list(scaler_state)

            avals = [jax.core.ShapedArray(tuple(a.shape), a.dtype) for a in weights + flat_states]
            cached = self._flat_updates[key] = (call, avals)
        return cached

    def _next_learning_rate(self) -> np.float32:
        """Count one update and return its learning rate (run on the host before every update)."""
        self._optimizer.num_update += 1
        return np.float32(self._optimizer.learning_rate)

    def update_in_trace(self, frame: _functional.CompileFrame, program: UpdateProgram, active: list[Parameter],
                        rescale: np.float32) -> None:
        """The update of ``step`` inside the trace of a compiled step (called by its whole-step ``frame``):
        ``program`` applied to ``active`` with the gradients multiplied by ``rescale``; the optimizer states
        are cells of ``frame``, the learning rate a host input."""
        frame.depends_on(self._optimizer)  # a new hyperparameter compiles the step again
        lr = frame.host_input(Cell(_cells.LR, self), self._next_learning_rate, (), np.float32)
        keys = [Cell(_cells.OPTIMIZER_STATE, p, self) for p in active]
        self._states_of(active)  # missing states are created together, as concrete arrays
        getters = [functools.partial(self._state, p) for p in active]
        states = [frame.read_cell(key, getter) for key, getter in zip(keys, getters)]
        weights = [p.data() for p in active]
        grads = [p.grad() for p in active]
        new_weights, new_states, scaler_state = program.plain(weights, grads, states, lr, rescale,
                                                           self._scaler_state(program))
        for param, key, getter, weight, state in zip(active, keys, getters, new_weights, new_states):
            param.set_data(weight)
            frame.write_cell(key, getter, functools.partial(self._states.__setitem__, param), state)
        consume_grads(active, store=frame)
        if scaler_state:
            self._loss_scaler.set_state(scaler_state)

    def _states_of(self, params: list[Parameter]) -> list[tuple]:
        """The optimizer states of ``params``; missing ones are created together: filled on the host
        when every leaf is a constant fill (zeros for most optimizers), else in one program."""
        states = list(map(self._states.get, params))
        if None not in states:  # the usual case: every state exists
            return states
        missing = [p for p in params if p not in self._states]
        if len(missing) > 1 and self._placement is None:
            create = self._optimizer.create_state_multi_precision
            with _functional.no_frame():
                weights = data_of(missing)
                created = _filled_on_host(create, weights)
                if created is None:
                    with jax.ensure_compile_time_eval():  # concrete arrays, also inside a hybrid.compile trace
                        created = jax.jit(lambda weights: [create(w) for w in weights])(weights)
            self._states.update(zip(missing, created))
        return [self._states.get(p) or self._state(p) for p in params]

    def _state(self, param: Parameter) -> tuple:
        state = self._states.get(param)
        if state is None:
            with _functional.no_frame(), jax.ensure_compile_time_eval():
                state = self._optimizer.create_state_multi_precision(data_of([param])[0])
                if self._placement is not None:
                    state = self._placement.place_state(param, state)
                self._states[param] = state
        return state

    def _program(self, params: Sequence[Parameter], guard: Any = None) -> UpdateProgram:
        """The update ``(weights, grads, states, lr, rescale, scaler_state) -> (weights, states,
        scaler_state)`` as jitted programs: donating weights and states, donating states only, and
        donating nothing (for staging on a recording); then ``guard``. With a ``guard``
        (``hybrid.amp.OverflowGuard``), the program unscales the gradients, keeps the old weights and
        states when one of them is not finite, and advances the loss scaler's state."""
        # The parameters' multipliers and the optimizer's hyperparameters are baked into the programs;
        # a change to any of them invalidates this trainer, which drops them all.
        last = self._last_program
        # the same parameter list as the last step: 8.7 -> 0.1 us for mlp33 (timeit)
        if last is not None and last[0] is params and last[1] is guard:
            return last[2]
        key = (tuple(map(id, params)), guard)
        program = self._update_programs.get(key)
        if program is None:
            opt = self._optimizer
            lr_mults = tuple(map(_LR_MULT, params))
            wd_mults = tuple(map(_WD_MULT, params))

            def apply(weights, grads, states, lr, rescale):
                grads = [opt.preprocess(g, rescale) for g in grads]
                lrs = [(lr * lm).astype(_update_dtype(w)) for w, lm in zip(weights, lr_mults)]
                wds = [jnp.asarray(opt.wd * wm, _update_dtype(w)) for w, wm in zip(weights, wd_mults)]
                new_weights, new_states = opt.update_all_multi_precision(weights, grads, states, lrs, wds)
                return ([w2.astype(w.dtype) for w, w2 in zip(weights, new_weights)],
                        [tuple(s2.astype(s1.dtype) for s1, s2 in zip(s, ns)) for s, ns in zip(states, new_states)])

            def update(weights, grads, states, lr, rescale, scaler_state):
                if guard is None:
                    return (*apply(weights, grads, states, lr, rescale), ())
                return guard.run(apply, weights, grads, states, lr, rescale, scaler_state)

            placed = {}
            if self._placement is not None:  # weights keep their sharding; states follow them
                placed["out_shardings"] = ([self._placement.shardings[p] for p in params], None, None)
            program = self._update_programs[key] = UpdateProgram(
                jax.jit(update, donate_argnums=(0, 2), **placed), jax.jit(update, donate_argnums=(2,), **placed),
                jax.jit(update, **placed), guard)
        self._last_program = (params, guard, program)
        return program

    # -- persistence ---------------------------------------------------------------------
    def save_states(self, fname: str) -> None:
        """Write optimizer states, update counts and the loss scaler's state (``hybrid.amp``) to ``fname``
        (atomic, no pickle)."""
        arrays = {}
        meta = {"optimizer": type(self._optimizer).__name__, "num_update": self._optimizer.num_update,
                "params": []}
        for i, (name, _, state) in enumerate(self.state_entries()):
            meta["params"].append({"name": name, "n_state": -1 if state is None else len(state)})
            for j, leaf in enumerate(state or ()):
                arrays[f"{i}.{j}"] = np.asarray(leaf)
        if self._loss_scaler is not None:
            meta["loss_scaler"] = self._loss_scaler.state_dict()
        arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        serialization.save_arrays(fname, arrays)

    def load_states(self, fname: str) -> None:
        """Restore states written by ``save_states``, matched to this Trainer's parameters by name.

        Raises ValueError (nothing changed) when the file belongs to another setup: another optimizer,
        other parameter names, states of other shapes, or damaged metadata."""
        self.states_loader(fname)()

    def states_loader(self, fname: str, data: bytes | None = None) -> Callable[[], None]:
        """:meth:`load_states` in two phases: read and check everything now (from ``data`` when given,
        the file's bytes), and return the function that applies it. Raises as :meth:`load_states`."""
        arrays = serialization.load_arrays(fname) if data is None else serialization.parse_npz(data, fname)
        meta, by_name = _state_file_meta(fname, arrays)
        if meta["optimizer"] != type(self._optimizer).__name__:
            raise ValueError(f"{fname}: states of optimizer {meta['optimizer']}, this Trainer uses "
                             f"{type(self._optimizer).__name__}")
        names = [self._names[p] for p in self._params]
        if sorted(by_name) != sorted(names):
            missing, extra = sorted(set(names) - set(by_name)), sorted(set(by_name) - set(names))
            raise ValueError(f"{fname}: the states are for other parameters (missing {missing[:5]}, not in this "
                             f"Trainer {extra[:5]})")
        restored = {}
        for param, name in zip(self._params, names):
            i, entry = by_name[name]
            if entry["n_state"] < 0:
                continue
            missing_leaves = [f"{i}.{j}" for j in range(entry["n_state"]) if f"{i}.{j}" not in arrays]
            if missing_leaves:
                raise ValueError(f"{fname}: state arrays {missing_leaves} of parameter {name!r} are missing")
            leaves = tuple(jnp.asarray(arrays[f"{i}.{j}"]) for j in range(entry["n_state"]))
            expected = jax.tree_util.tree_map(lambda x: (x.shape, x.dtype),
                                              self._optimizer.create_state_multi_precision(param.data()))
            got = tuple((leaf.shape, leaf.dtype) for leaf in leaves)
            if got != tuple(expected):
                raise ValueError(f"{fname}: state of parameter {entry['name']!r} has shapes/dtypes {got}, "
                                 f"expected {tuple(expected)}")
            restored[param] = leaves
        return functools.partial(self.states_restorer(meta["num_update"], meta.get("loss_scaler"), fname), restored)

    def states_restorer(self, num_update: int, loss_scaler: dict | None,
                        where: str) -> Callable[[dict[Parameter, tuple]], None]:
        """Check a saved loss scaler state (``LossScaler.state_dict()``, or None) now, and return the function
        that takes the optimizer states by parameter (tuples of arrays) and makes them this trainer's, in
        place of all others, with the update count ``num_update`` and that loss scaler state (kept without a
        scaler or a saved state). Raises ValueError naming ``where`` for a loss scaler state that is not one."""
        scaler = self._loss_scaler
        checked = scaler.checked_state(loss_scaler, where) if loss_scaler is not None and scaler is not None else None

        def restore(states: dict[Parameter, tuple]) -> None:
            self._states.clear()  # in place: compiled steps write states back into this dict
            self._states.update(states)
            self._optimizer.num_update = num_update
            if checked is not None:
                self._loss_scaler._set_state(checked)
        return restore


_NOT_KEPT = ("the gradient was consumed by trainer.step, which does not keep gradients "
             "(Trainer(..., keep_grads=False)); read it before step, or keep them with keep_grads=True")


def _update_dtype(weight: Any) -> Any:
    """The dtype of a weight's learning rate and weight decay: float32 at least (float16 and bfloat16
    weights are updated in float32)."""
    return jnp.promote_types(weight.dtype, jnp.float32)


def _filled_on_host(create: Callable, weights: list) -> list[tuple] | None:
    """``create(w)`` for each of ``weights``, filled by NumPy and put on each weight's device in one call,
    when each of its results is a constant fill (``jnp.zeros_like``, a scalar...) as its trace shows; None
    when one depends on anything else or a weight is spread over several devices."""
    if any(len(w.devices()) != 1 for w in weights):
        return None
    templates: dict[tuple, list | None] = {}
    leaves, devices, sizes = [], [], []
    for weight in weights:
        key = (tuple(weight.shape), np.dtype(weight.dtype))
        if key not in templates:
            templates[key] = _fill_template(create, jax.ShapeDtypeStruct(*key))
        template = templates[key]
        if template is None:
            return None
        leaves += [np.full(shape, value, dtype) for shape, value, dtype in template]
        devices += [next(iter(weight.devices()))] * len(template)
        sizes.append(len(template))
    if not any(w.committed for w in weights):
        devices = None  # as uncommitted as the weights: a program taking both then compiles once, not again
    with jax.ensure_compile_time_eval():  # concrete arrays, also inside a hybrid.compile trace
        return list(_group(jax.device_put(leaves, devices), tuple(sizes)))


def _fill_template(create: Callable, aval: Any) -> list[tuple] | None:
    """(shape, value, dtype) of each result of ``create`` on ``aval``, or None unless each is a literal or a
    ``broadcast_in_dim`` of one. (Not under ``jax.ensure_compile_time_eval``, where the trace would hold
    the results as computed constants.)"""
    closed = jax.make_jaxpr(create)(aval)
    fills = {}
    for eqn in closed.jaxpr.eqns:
        if eqn.primitive.name != "broadcast_in_dim" or not isinstance(eqn.invars[0], jax_core.Literal):
            return None
        fills[eqn.outvars[0]] = (eqn.params["shape"], eqn.invars[0].val, eqn.outvars[0].aval.dtype)
    template = []
    for var in closed.jaxpr.outvars:
        if isinstance(var, jax_core.Literal):
            template.append(((), var.val, var.aval.dtype))
        elif var in fills:
            template.append(fills[var])
        else:
            return None
    return template


def _group(leaves: list, sizes: tuple) -> Any:
    """``leaves`` cut into consecutive tuples of ``sizes`` (an iterator)."""
    if len(set(sizes)) == 1:  # every state has the same number of leaves (the usual case)
        return zip(*[iter(leaves)] * sizes[0]) if sizes[0] else (() for _ in sizes)
    ends = list(itertools.accumulate(sizes))
    return (tuple(leaves[end - size:end]) for size, end in zip(sizes, ends))


def _state_file_meta(fname: str, arrays: dict) -> tuple[dict, dict]:
    """The metadata of a Trainer state file, checked, and its parameter entries by name."""
    if "__meta__" not in arrays:
        raise ValueError(f"{fname}: not a Trainer state file (no metadata)")
    try:
        meta = json.loads(arrays["__meta__"].tobytes().decode())
        entries = meta["params"]
        by_name = {}
        for i, entry in enumerate(entries):
            if not isinstance(entry["name"], str) or not isinstance(entry["n_state"], int) or entry["n_state"] < -1:
                raise TypeError(entry)
            by_name[entry["name"]] = (i, entry)
        optimizer, num_update = meta["optimizer"], meta["num_update"]
        if not isinstance(optimizer, str) or isinstance(num_update, bool) or not isinstance(num_update, int):
            raise TypeError(meta)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, AttributeError) as exc:
        raise ValueError(f"{fname}: damaged Trainer state metadata ({type(exc).__name__})") from None
    if not 0 <= num_update < 2 ** 53:
        raise ValueError(f"{fname}: num_update {num_update} is not a valid update count")
    if len(by_name) != len(entries):
        raise ValueError(f"{fname}: a parameter name appears twice in the state file")
    return meta, by_name

