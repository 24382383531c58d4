"""Block and HybridBlock: the layer API, the bridge between objects and compiled functions."""
from __future__ import annotations

import inspect
import itertools
import os
import re
import threading
import warnings
import weakref
from collections import OrderedDict
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ._compiled import cached_op as _cached_op, state as _state, structure as _structure
from ._core import context as _context, functional as _functional, lazy as _lazy
from .gluon1 import blocks as _gluon1
from . import autograd
from . import init as _init
from ._core.cells import ATTRIBUTE, Cell
from ._core.watch import Watched
from ._compiled.inputs import convert_inputs, needs_conversion
from .errors import DeferredInitializationError, HybridizeError, ShapeError, locate
from .graph.memory.remat import check_spec as check_remat
from .graph.pipeline import resolve_passes
from .parameter import Parameter, ParameterDict, parameter_file_loader, save_parameter_file, unique_params

if TYPE_CHECKING:
    from ._compiled.cached_op import CachedOp

__all__ = ["Block", "HybridBlock", "HookHandle"]


@contextmanager
def eager_only() -> Iterator[None]:
    """Run hybridized blocks eagerly inside the ``with`` block (used by ``summary``)."""
    with _context.scope(eager_only=True):
        yield


def _is_array_like(value: Any) -> bool:
    if isinstance(value, (jax.Array, np.ndarray, np.generic, int, float, complex)):
        return True
    if isinstance(value, (list, tuple)):  # e.g. recurrent states
        return all(isinstance(v, (jax.Array, np.ndarray)) for v in value)
    return False


def _input_type_error(block: "Block", args: tuple, exc: AttributeError) -> Exception:
    """A TypeError naming the input when an AttributeError comes from an input that is not an array."""
    for i, arg in enumerate(args):
        if not _is_array_like(arg):
            return TypeError(f"{type(block).__name__} expects arrays as inputs, but input {i} is "
                             f"of type {type(arg).__name__} ({exc})")
    return exc


_NAME_COUNTS: dict[str, Iterator[int]] = {}


class _Naming(threading.local):
    """Gluon 1.x naming state of this thread: the blocks whose ``name_scope()`` is open (innermost last),
    and for each block under construction ``[prefix given to the constructor, claimed by Block.__init__]``."""

    def __init__(self):
        self.scopes: list = []
        self.pending: list = []


_NAMING = _Naming()


def _next_name(hint: str) -> str:
    counter = _NAME_COUNTS.get(hint)
    if counter is None:
        counter = _NAME_COUNTS.setdefault(hint, itertools.count())
    return f"{hint}{next(counter)}"


def _shared_below(shared: dict, child: str) -> dict:
    """The entries of ``shared`` under ``child.``, renamed relative to that child."""
    head = child + "."
    return {name[len(head):]: p for name, p in shared.items() if name.startswith(head)}


def _holds_blocks(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is a list, tuple or dict with a Block among its items, at any nesting depth."""
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, (list, tuple)) or depth > 8:
        return False
    return any(isinstance(item, Block) or _holds_blocks(item, depth + 1) for item in value)


def _unregistered_block_warning(block: "Block", name: str, value: Any) -> None:
    warnings.warn(
        f"{type(block).__name__}.{name} is a {type(value).__name__} holding Blocks; Blocks inside a list, tuple "
        "or dict are not registered (their parameters are not collected, initialised or saved). Register them "
        "with register_child(), or use nn.Sequential / nn.HybridSequential.", stacklevel=4)


def _holds_arrays(value: Any) -> bool:
    return any(isinstance(leaf, (jax.Array, np.ndarray)) for leaf in jax.tree_util.tree_leaves(value))


def _is_new_setting(old: Any, new: Any) -> bool:
    """Whether replacing the attribute value ``old`` by ``new`` may change what ``forward`` computes
    (arrays are data, not settings: their changes are not counted)."""
    if old is new or _holds_arrays(old) or _holds_arrays(new):
        return False
    key = _structure.plain_key(old)
    return key is None or key != _structure.plain_key(new)


_BAKED_WARNED: "weakref.WeakSet[Block]" = weakref.WeakSet()


def _baked_parameters_warning(block: "Block") -> None:
    warnings.warn(
        f"{type(block).__name__} is called inside jax.jit (or a loop or branch traced for it) without apply: its "
        "parameters enter the compiled program as constants, so the jitted function keeps computing with the "
        "values it was traced with after they change (trainer.step, load_parameters). Pass the state instead: "
        "jax.jit(lambda state, x: net.apply(state, x)[0])(net.state(), x). (jax.eval_shape, which computes "
        "only shapes, is not affected.)", UserWarning, stacklevel=4)


class HookHandle:
    """Returned by ``register_forward_(pre_)hook``; ``detach()`` removes the hook."""

    def __init__(self, hooks: OrderedDict, key: int):
        self._hooks, self._key = hooks, key

    def detach(self) -> None:
        self._hooks.pop(self._key, None)
        _TREE_CHANGES[0] += 1

    def __enter__(self) -> "HookHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.detach()


def _to_jax(tree: Any) -> Any:
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x) if isinstance(x, np.ndarray) else x, tree)


def _indent(text: str, spaces: int) -> str:
    return text.replace("\n", "\n" + " " * spaces)


_GLUON1_KEYWORDS = ("prefix", "params")
# Counts changes of any block's children, parameters or hooks: answers computed from a block's tree
# hold while it is unchanged.
_TREE_CHANGES = [0]
_DECLARED: "weakref.WeakKeyDictionary[type, frozenset]" = weakref.WeakKeyDictionary()


def _declared_gluon1_keywords(cls: type[Any]) -> frozenset:
    """Which of ``prefix``/``params`` ``cls.__init__`` names explicitly (those it handles itself)."""
    names = _DECLARED.get(cls)
    if names is None:
        try:
            parameters: Mapping[str, inspect.Parameter] = inspect.signature(cls.__init__).parameters
        except (TypeError, ValueError):
            parameters = {}
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        names = frozenset(n for n in _GLUON1_KEYWORDS if n in parameters and parameters[n].kind in kinds)
        _DECLARED[cls] = names
    return names


class _BlockMeta(type):
    """Lets every Block accept Gluon 1.x's ``prefix=`` and ``params=`` keywords: a class whose ``__init__``
    does not name them gets them taken out of the call and applied once it is constructed."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        taken = {}
        if "prefix" in kwargs or "params" in kwargs:
            declared = _declared_gluon1_keywords(cls)
            taken = {k: kwargs.pop(k) for k in _GLUON1_KEYWORDS if k in kwargs and k not in declared}
        entry = [taken.pop("prefix", None), False]  # Block.__init__ applies the prefix (before any child)
        _NAMING.pending.append(entry)
        try:
            block = super().__call__(*args, **kwargs)
        finally:
            _NAMING.pending.pop()
        if not entry[1] and entry[0] is not None:
            taken["prefix"] = entry[0]
        if taken or block.__dict__.get("_shared_params"):
            block._apply_gluon1_keywords(**taken)
        return block


class Block(Watched, metaclass=_BlockMeta):
    """Base class of all layers and models.

    Assigning a Block or a Parameter as an attribute registers it; structural
    names (``'features.0.weight'``) come from attribute names.  Subclasses
    implement ``forward(self, *args)``.

    Every Block (layers included) accepts Gluon 1.x's keywords: ``prefix`` (a str) sets
    :attr:`prefix` and :attr:`name`, not the parameters' keys; ``params`` (a dict of
    Parameters by structural name, e.g. another block's ``collect_params()``) shares those
    Parameters once the block is built, as :meth:`share_parameters` does. Raises TypeError for
    a ``prefix`` that is not a str or ``params`` that is not a dict of Parameters, ValueError
    when no name of ``params`` is a parameter of the block, ShapeError for a shared
    parameter of another shape.
    """

    _active = False
    _children: OrderedDict[str, Block]
    _reg_params: OrderedDict[str, Parameter]
    _forward_hooks: OrderedDict[int, Callable]
    _forward_pre_hooks: OrderedDict[int, Callable]
    _scope_name: str
    _name: str
    _prefix: str | None
    # set only on some blocks (read through self.__dict__.get):
    _shared_params: dict[str, Parameter]  # Gluon 1.x's params=
    _gluon1_params: dict[str, Parameter]  # created by self.params.get
    _scope_counts: dict[str, int]  # blocks of each class created in this block's name_scope

    def __init__(self, prefix: str | None = None, params: dict[str, Parameter] | None = None):
        object.__setattr__(self, "_children", OrderedDict())
        object.__setattr__(self, "_reg_params", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_scope_name", "")
        pending = _NAMING.pending
        if pending and not pending[-1][1]:
            pending[-1][1] = True
            if prefix is None:
                prefix = pending[-1][0]
        scope = _NAMING.scopes[-1] if _NAMING.scopes else None
        hint = type(self).__name__.lower()
        if scope is None:
            name = _next_name(hint)
        else:  # Gluon 1.x: inside a name_scope, the parent's prefix and a count per class in that scope
            counts = scope.__dict__.get("_scope_counts")
            if counts is None:
                counts = {}
                object.__setattr__(scope, "_scope_counts", counts)
            count = counts.get(hint, 0)
            if prefix is None:
                counts[hint] = count + 1
            name = f"{scope.prefix}{hint}{count}"
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_prefix", None)
        if prefix is not None:
            self._set_prefix(prefix)
        if params is not None:
            self._set_shared(params)  # used as parameters are registered, checked once built (_BlockMeta)

    @property
    def name(self) -> str:
        """Gluon 1.x's block name: the class name in lower case and a count per class in creation order
        (``dense0``, ``dense1``, ...), or ``prefix`` less a trailing ``'_'`` when one was given.
        Parameters are keyed by structural names instead."""
        prefix = self.__dict__.get("_prefix")
        if prefix is not None:
            return prefix[:-1] if prefix.endswith("_") else prefix
        return self._name

    @property
    def prefix(self) -> str:
        """Gluon 1.x's prefix: the ``prefix=`` given to the constructor, else ``name + '_'``."""
        prefix = self.__dict__.get("_prefix")
        return self._name + "_" if prefix is None else prefix

    @contextmanager
    def name_scope(self) -> Iterator["Block"]:
        """Gluon 1.x's name scope: blocks created inside get this block's prefix before their own
        (``mlp0_dense0_``), counted per class within the scope, as in Gluon 1.x. Only names change:
        parameters are keyed by structural names (attribute paths) either way."""
        _NAMING.scopes.append(self)
        try:
            yield self
        finally:
            _NAMING.scopes.pop()

    def _set_prefix(self, prefix: Any) -> None:
        if not isinstance(prefix, str):
            raise TypeError(f"{type(self).__name__}: prefix must be a str, got {type(prefix).__name__}")
        scope = _NAMING.scopes[-1] if _NAMING.scopes else None
        if scope is not None and scope is not self:
            prefix = scope.prefix + prefix
        object.__setattr__(self, "_prefix", prefix)

    def _apply_gluon1_keywords(self, prefix: str | None = None, params: Any = None) -> None:
        """Apply Gluon 1.x's constructor keywords once the block is built (called by ``_BlockMeta``)."""
        if prefix is not None:
            self._set_prefix(prefix)
        if params is not None:
            self._set_shared(params)
        shared = self.__dict__.get("_shared_params")
        if not shared:
            return
        matched = self._adopt_shared(shared)
        if not matched and self.collect_params():
            own = sorted(self.collect_params())
            raise ValueError(f"{type(self).__name__}(params=...): none of the shared names ({sorted(shared)[:6]}) "
                             f"is a parameter of this block (it has {own[:6]}). hybrid matches parameters by "
                             "structural name (attribute path, e.g. '0.weight'), not by Gluon 1.x's prefixed "
                             "names: pass the collect_params() of a block of the same structure, or call "
                             "share_parameters with a dict renamed to this block's names.")

    def _set_shared(self, shared: Any) -> None:
        """Keep Gluon 1.x's ``params=`` (Parameters by structural name) for this block's registrations."""
        who = f"{type(self).__name__}(params=...)"
        if not isinstance(shared, dict):
            raise TypeError(f"{who}: params must be a dict of Parameters by structural name (e.g. another "
                            f"block's collect_params()), got {type(shared).__name__}")
        for name, param in shared.items():
            if not isinstance(param, Parameter):
                raise TypeError(f"{who}: params[{name!r}] is a {type(param).__name__}, not a Parameter")
        object.__setattr__(self, "_shared_params", dict(shared))

    def _shared_for(self, name: str, param: Parameter) -> Parameter:
        """The shared Parameter to register under ``name`` instead of ``param`` (``param`` if none)."""
        shared = self.__dict__.get("_shared_params")
        other = shared.get(name) if shared else None
        if other is None or other is param:
            return param
        if other.shape is not None and param.shape is not None and (
                len(other.shape) != len(param.shape) or any(a != b and a and b for a, b in zip(other.shape,
                                                                                            param.shape))):
            raise ShapeError(f"{type(self).__name__}(params=...): shared parameter {name!r} has shape "
                             f"{other.shape}, this block's has shape {param.shape}")
        return other

    def _adopt_shared(self, shared: dict[str, Parameter]) -> int:
        """Use the Parameters of ``shared`` (by name relative to this block) for the parameters registered
        so far, and keep them for later registrations; returns how many names matched."""
        shared = {**self.__dict__.get("_shared_params", {}), **shared}
        object.__setattr__(self, "_shared_params", shared)
        matched = 0
        for name, param in list(self._reg_params.items()):
            if name in shared:
                matched += 1
                other = self._shared_for(name, param)
                if other is not param:
                    setattr(self, name, other)
        for child_name, child in self._children.items():
            sub = _shared_below(shared, child_name)
            if sub:
                matched += child._adopt_shared(sub)
        return matched

    # -- registration -------------------------------------------------------------
    def _changed(self, forward: bool = True) -> None:
        _TREE_CHANGES[0] += 1
        super()._changed(forward)

    def __setattr__(self, name: str, value: Any) -> None:
        if "_children" not in self.__dict__:
            if isinstance(value, (Block, Parameter)) or _holds_arrays(value):
                raise RuntimeError(f"{type(self).__name__}.__init__ must call super().__init__() before "
                                   f"assigning {name!r} (a {type(value).__name__})")
            object.__setattr__(self, name, value)  # plain settings, as Gluon 1.x code sets some first
            return
        existing = self.__dict__.get(name)
        if isinstance(existing, (Block, Parameter)) and value is not None and \
                not isinstance(value, (Block, Parameter)):
            raise TypeError(f"{type(self).__name__}.{name}: cannot replace a {type(existing).__name__} "
                            f"with a {type(value).__name__}")
        if isinstance(value, Block):
            self.register_child(value, name)
        elif isinstance(value, Parameter):
            if "_gluon1_params" in self.__dict__:
                self._rename_gotten(name, value)
            if "_shared_params" in self.__dict__:
                value = self._shared_for(name, value)
            self._children.pop(name, None)
            self._reg_params[name] = value
            value.adopt_name(name)
            self._changed()
        elif value is None and (name in self._children or name in self._reg_params):
            self._children.pop(name, None)
            self._reg_params.pop(name, None)
            self._changed()
        elif isinstance(value, _lazy.LazyArray):
            self._set_state_attribute(name, value)
            return
        elif _holds_blocks(value):
            _unregistered_block_warning(self, name, value)
        elif not name.startswith("_") and _holds_arrays(value):
            _context.current().mode.assign_attribute(self, name, value)
        elif self.__dict__.get("_watcher_set") and name in self.__dict__ and \
                _is_new_setting(self.__dict__[name], value):
            object.__setattr__(self, name, value)
            self._changed()  # a setting that compiled programs were traced with
            return
        object.__setattr__(self, name, value)

    def _set_state_attribute(self, name: str, value: Any) -> None:
        """Set an attribute computed by forward; a recorded value is replaced by its data once computed."""
        object.__setattr__(self, name, value)
        if isinstance(value, _lazy.LazyArray) and not value._tape.released:
            def computed(data, name=name, value=value):
                if self.__dict__.get(name) is value:
                    object.__setattr__(self, name, data)
            value._tape.write(Cell(ATTRIBUTE, self, name), value, computed)

    def __delattr__(self, name: str) -> None:
        if name in self._children or name in self._reg_params:
            self._children.pop(name, None)
            self._reg_params.pop(name, None)
            self._changed()
        object.__delattr__(self, name)

    def register_child(self, block: "Block", name: str | None = None) -> None:
        """Register ``block`` as a child under ``name`` (default: its index among children)."""
        if not isinstance(block, Block):
            raise TypeError(f"{type(self).__name__}: children must be Blocks, got {type(block).__name__}")
        name = str(len(self._children)) if name is None else name
        self._reg_params.pop(name, None)
        self._children[name] = block
        object.__setattr__(block, "_scope_name", name)
        shared = self.__dict__.get("_shared_params")
        if shared:
            sub = _shared_below(shared, name)
            if sub:
                block._adopt_shared(sub)
        self._changed()

    @property
    def params(self) -> ParameterDict:
        """This block's own parameters (not its children's), by attribute name, as a
        :class:`~hybrid.parameter.ParameterDict` (a ``dict``). Its ``get(name, shape=..., ...)`` and
        ``get_constant(name, value)`` create parameters of this block as Gluon 1.x's do."""
        return ParameterDict._of_block(self, self._reg_params)

    @property
    def _params(self) -> ParameterDict:
        """Gluon 1.x's ``Block._params``: the block's own parameters, as :attr:`params` gives them."""
        return self.params

    def _gluon1_parameter(self, name: str, make: Callable[[str], Parameter],
                          reuse: Callable[[Parameter], None]) -> Parameter:
        """Gluon 1.x's ``self.params.get``: the parameter this block registered as ``name`` (by
        ``params.get`` or as an attribute), checked by ``reuse``; else the one shared under ``name`` by
        ``params=``; else ``make(full 1.x name)``. A new parameter is registered under ``name`` until it is
        assigned to an attribute of another name (then it goes by that name, as in Gluon 1.x)."""
        gotten = self.__dict__.get("_gluon1_params")
        existing = gotten.get(name) if gotten else None
        if existing is None:
            existing = self._reg_params.get(name)
        if existing is not None:
            reuse(existing)
            if not any(p is existing for p in self._reg_params.values()):  # unregistered by `attr = None`
                self._reg_params[name] = existing
                self._changed()
            return existing
        param = make(self.prefix + name)
        param.gluon1_name = name
        if "_shared_params" in self.__dict__:
            param = self._shared_for(name, param)
        if gotten is None:
            gotten = {}
            object.__setattr__(self, "_gluon1_params", gotten)
        gotten[name] = param
        self._reg_params[name] = param
        self._changed()
        return param

    def _rename_gotten(self, name: str, param: Parameter) -> None:
        """``self.<name> = self.params.get(other)``: the parameter goes by ``name`` instead of ``other``."""
        for other, gotten in self._gluon1_params.items():
            if gotten is param and other != name and self._reg_params.get(other) is param:
                del self._reg_params[other]

    def collect_params(self, select: str | None = None) -> ParameterDict:
        """All parameters of this block and its children, keyed by structural name, as a
        :class:`~hybrid.parameter.ParameterDict`: a ``dict`` with Gluon's ``initialize``, ``setattr``,
        ``zero_grad``, ``reset_device``, ``list_device``, ``save`` and ``load``.

        ``select`` is a regular expression matched (``re.match``) against the names,
        e.g. ``'.*weight'``. Shared parameters appear under each of their names.
        """
        found = ParameterDict()
        self._collect_params_with_prefix("", found)
        self._warn_unregistered_containers()
        if select is None:
            return found
        pattern = re.compile(select)
        return ParameterDict((name, p) for name, p in found.items() if pattern.match(name))

    def _collect_params_with_prefix(self, prefix: str = "", out: dict | None = None) -> dict:
        """The parameters of this block and its descendants by structural name (``'features.0.weight'``),
        each name after ``prefix + '.'`` when ``prefix`` is given, added to ``out`` (a new OrderedDict when
        None, as Gluon 1.x's ``_collect_params_with_prefix(prefix='')``); returns ``out``."""
        if out is None:
            out = OrderedDict()
        if prefix:
            prefix += "."
        for name, param in self._reg_params.items():
            out[prefix + name] = param
        for name, child in self._children.items():
            child._collect_params_with_prefix(prefix + name, out)
        return out

    def _file_names(self) -> dict[str, str]:
        """The names parameter files give some of this block's own parameters (attribute name -> name in
        the file, relative to the block; may be dotted), where they differ from the attribute names; none
        by default. MXNet 1.x's fused RNN layers save ``l0_i2h_weight`` as ``_unfused.0.i2h_weight``."""
        return {}

    def _file_params(self) -> dict[str, Parameter]:
        """All parameters keyed by the names :meth:`save_parameters` writes: the structural names with each
        block's :meth:`_file_names` applied below its path. Shared parameters appear under each name."""
        out: dict[str, Parameter] = {}
        self._collect_file_params("", out)
        return out

    def _collect_file_params(self, prefix: str, out: dict) -> None:
        if prefix:
            prefix += "."
        renames = self._file_names()
        for name, param in self._reg_params.items():
            out[prefix + renames.get(name, name)] = param
        for name, child in self._children.items():
            child._collect_file_params(prefix + name, out)

    def _warn_unregistered_containers(self) -> None:
        """Gluon's warning, when parameters are collected, for containers that came to hold Blocks after
        they were assigned (``self.layers = {}; self.layers['a'] = [nn.Dense(2)]``)."""
        blocks: list[Block] = []
        self.apply(blocks.append)
        for block in blocks:
            for name, value in vars(block).items():
                if not name.startswith("_") and _holds_blocks(value):
                    _unregistered_block_warning(block, name, value)

    def _unique_params(self) -> list[Parameter]:
        return unique_params(self.collect_params())

    # -- whole-tree operations ------------------------------------------------------
    def initialize(self, init: Any = _init.Uniform(), device: Any = None, verbose: bool = False,
                   force_reinit: bool = False, ctx: Any = None) -> "Block":
        """Initialise every parameter; a parameter's own ``init`` wins over ``init``.

        Parameters with unknown shapes are initialised at the first forward call. ``device`` (Gluon
        1.x: ``ctx``), a ``jax.Device``, places the data there (None: JAX's default device). ``verbose``
        prints a line per parameter initialised.
        """
        self.collect_params()._initialize(init, ctx if device is None else device, verbose, force_reinit,
                                          f"{type(self).__name__}.initialize")
        return self

    def reset_device(self, device: Any) -> "Block":
        """Move every parameter's data and gradient to ``device`` (a ``jax.Device``; Gluon's ``reset_ctx``)."""
        for param in self._unique_params():
            param.reset_device(device)
        return self

    reset_ctx = reset_device

    def setattr(self, name: str, value: Any) -> "Block":
        """Set attribute ``name`` of every parameter of this block and its children, e.g.
        ``net.setattr('grad_req', 'null')`` to freeze a network, or ``net.setattr('lr_mult', 0.1)``."""
        for param in self._unique_params():
            setattr(param, name, value)
        return self

    def apply(self, fn_or_state: Any, *inputs: Any, training: bool = False, key: Any = None, **kwargs: Any) -> Any:
        """Two calls share Gluon's name:

        - ``apply(fn)`` (Gluon): call ``fn`` on every descendant (children first), then on this block;
          returns the block.
        - ``apply(state, *inputs, training=False, key=None, **kwargs)``: run the network as a pure function
          of ``state`` (the dict :meth:`state` returns) and return ``(outputs, new_state)``. Nothing in the
          blocks is read or changed, so it works inside ``jax.jit``, ``grad``, ``vmap``, ``lax.scan``...
          ``new_state`` has the running statistics of a ``training=True`` call and the attributes
          ``forward`` assigned. ``key`` (a PRNG key) feeds randomness such as dropout.

        Raises ValueError when ``state`` misses or adds names, or randomness is used without ``key``;
        ShapeError when an array's shape differs from its parameter's.
        """
        if callable(fn_or_state) and not isinstance(fn_or_state, Mapping):
            if inputs or kwargs or training or key is not None:
                raise TypeError(f"{type(self).__name__}.apply(fn) takes only the function; to run the network "
                                "on inputs, pass the state dict first: apply(net.state(), x)")
            for child in self._children.values():
                child.apply(fn_or_state)
            fn_or_state(self)
            return self
        return _state.apply_state(self, fn_or_state, inputs, kwargs, training, key)

    def state(self) -> dict[str, Any]:
        """The network's state, ``{structural name: array}`` (a pytree): every parameter (a shared one once,
        under its first name), running statistics included, and the public array attributes of its blocks
        (``'path.name'``). The arrays are the current values, not copies.

        Raises DeferredInitializationError / UninitializedParameterError for a parameter without data.
        """
        return _state.state_of(self)

    def load_state(self, state: Mapping[str, Any] | str | os.PathLike) -> None:
        """Write ``state`` (from :meth:`state` or :meth:`apply`, or the path of a :meth:`save_state` file)
        into the network. Everything is checked before anything changes.

        Raises ValueError for missing or unknown names, ShapeError for a wrong shape,
        TransformStateError inside a JAX transformation, FileNotFoundError / FormatError for a file.
        """
        if isinstance(state, (str, os.PathLike)):
            _state.load_state_file(self, state)
        else:
            _state.load_state(self, state)

    def save_state(self, path: str | os.PathLike) -> None:
        """Write :meth:`state` to ``path`` atomically: a ``.safetensors`` file when the name ends so (needs the
        ``safetensors`` package), else ``.npz``."""
        _state.save_state_file(self, path)

    def zero_grad(self) -> None:
        """Set every parameter's gradient to zeros."""
        for param in self._unique_params():
            param.zero_grad()

    def cast(self, dtype: Any) -> "Block":
        """Convert all parameters to ``dtype``."""
        for child in self._children.values():
            child.cast(dtype)
        for param in self._reg_params.values():
            param.cast(dtype)
        return self

    def share_parameters(self, shared: dict[str, Parameter] | None) -> "Block":
        """Use the Parameters in ``shared`` (by structural name) instead of this block's own."""
        if shared is None:
            return self
        own = self.collect_params()
        for name, param in shared.items():
            if name not in own:
                continue
            owner, attr = self._owner_of(name)
            setattr(owner, attr, param)
        return self

    def _owner_of(self, structural_name: str) -> tuple["Block", str]:
        *path, attr = structural_name.split(".")
        block = self
        for part in path:
            block = block._children[part]
        return block, attr

    def hybridize(self, active: bool = True, **kwargs: Any) -> None:
        """Hybridize the HybridBlock children (a plain Block itself always runs imperatively).

        ``kwargs`` are :meth:`HybridBlock.hybridize`'s (``static_alloc``, ``passes``, ``remat``, and Gluon's
        ``inline_limit``, ``forward_bulk_size``, ``backward_bulk_size``, which have no effect on XLA).
        """
        for child in self._children.values():
            child.hybridize(active, **kwargs)

    # -- hooks --------------------------------------------------------------------------
    def register_forward_pre_hook(self, hook: Callable) -> HookHandle:
        """``hook(block, args)`` runs before each forward call."""
        self._forward_pre_hooks[id(hook)] = hook
        _TREE_CHANGES[0] += 1
        return HookHandle(self._forward_pre_hooks, id(hook))

    def register_forward_hook(self, hook: Callable) -> HookHandle:
        """``hook(block, args, outputs)`` runs after each forward call."""
        self._forward_hooks[id(hook)] = hook
        _TREE_CHANGES[0] += 1
        return HookHandle(self._forward_hooks, id(hook))

    # -- calling --------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        depth = _context.call_depth
        wrap_outputs = None
        if needs_conversion(args, kwargs):  # PyTorch tensors, lists of numbers, the alias's handles
            args, kwargs, wrap_outputs = convert_inputs(self, args, kwargs, not depth.value)
        for hook in tuple(self._forward_pre_hooks.values()):
            hook(self, args)
        depth.value += 1
        try:
            out = self._dispatch(args, kwargs)
        except Exception as exc:
            error = _input_type_error(self, args, exc) if isinstance(exc, AttributeError) else exc
            error = self._located_error(error, depth.value == 1)
            if error is exc:
                raise
            raise error from exc
        finally:
            depth.value -= 1
        for hook in tuple(self._forward_hooks.values()):
            hook(self, args, out)
        return out if wrap_outputs is None else wrap_outputs(out)

    def _dispatch(self, args: tuple, kwargs: dict) -> Any:
        return _context.stack.top.mode.call_block(self, args, kwargs)

    # -- what the modes call (hybrid._core.modes) --
    def _uses_compiled(self) -> bool:
        """Whether a call runs the compiled forward (hybridized, and not inside ``eager_only``)."""
        return (self._active or self._runs_compiled()) and not _context.current().eager_only

    def _run_python(self, args: tuple, kwargs: dict) -> Any:
        """The Python forward on the inputs as JAX arrays."""
        return self._run_forward((_to_jax(args), _to_jax(kwargs)))

    def _call_in_transform(self, args: tuple, kwargs: dict) -> Any:
        """A call inside a JAX transformation without ``apply`` (``jax.jit(lambda x: net(x))``): nothing
        may write state."""
        if _lazy.staged_out() and self not in _BAKED_WARNED:
            _BAKED_WARNED.add(self)
            _baked_parameters_warning(self)
        with _functional.frame({}, frame_type=_functional.TransformFrame) as frame:
            return frame.call_block(self, args, kwargs)

    def _traced_attribute_error(self, name: str) -> HybridizeError:
        return HybridizeError(
            f"{type(self).__name__}.{name}: cannot keep a traced value (assigned inside a JAX "
            "transformation) as an attribute; return it from forward instead")

    def _run_forward(self, packed: tuple) -> Any:
        args, kwargs = packed
        tracing = _context.current().mode.inline_hybridized and self._scope_name
        with jax.named_scope(self._scope_name) if tracing else nullcontext():
            try:
                return self.forward(*args, **kwargs)
            except DeferredInitializationError:
                if not self._init_deferred(args, kwargs):
                    raise
                return self.forward(*args, **kwargs)

    def _init_deferred(self, args: tuple, kwargs: dict) -> bool:
        """Initialise this block's parameters whose shapes waited for inputs like ``args``/``kwargs``
        (:meth:`infer_shape`); False when it has none."""
        deferred = [p for p in self._reg_params.values() if p.is_deferred]
        if not deferred:
            return False
        _context.current().mode.deferred_init(self)
        self.infer_shape(*args, **kwargs)
        for param in deferred:
            param.finish_deferred_init()
        return True

    def _located_error(self, exc: Exception, is_root: bool) -> Exception:
        if isinstance(exc, _cached_op._TRACER_ERRORS) and _context.current().mode.inline_hybridized:
            exc = _cached_op.control_flow_error(self, exc)
        if getattr(exc, "_hybrid_block", None) is None:
            try:
                exc._hybrid_block = self  # type: ignore[attr-defined]  # the block an error came from, kept on it
            except AttributeError:
                pass
        if is_root:
            locate(exc, self._describe(getattr(exc, "_hybrid_block", self)))
        return exc

    def _describe(self, target: "Block") -> str:
        path = self._path_to(target)
        if path is None or path == "":
            return f"{type(target).__name__}"
        return f"{type(target).__name__} '{path}'"

    def _path_to(self, target: "Block") -> str | None:
        if target is self:
            return ""
        for name, child in self._children.items():
            sub = child._path_to(target)
            if sub is not None:
                return name if sub == "" else f"{name}.{sub}"
        return None

    def forward(self, *args: Any) -> Any:
        """The computation; override in subclasses."""
        raise NotImplementedError(f"{type(self).__name__} must implement forward()")

    @_structure.generic_infer_shape
    def infer_shape(self, *args: Any, **kwargs: Any) -> None:
        """Fill in unknown parameter shapes from the first inputs; override in layers that defer."""
        unknown = [f"{name} {p.shape}" for name, p in self._reg_params.items() if not p.is_initialized]
        raise DeferredInitializationError(
            f"parameters {unknown} have unknown shapes and {type(self).__name__} does not implement "
            "infer_shape(); give the shapes explicitly")

    def _get_cached_op(self) -> _cached_op.CachedOp:
        raise HybridizeError(f"{type(self).__name__} is a plain Block and cannot be hybridized")

    def _compiled_op(self) -> _cached_op.CachedOp:
        """The compiled calls of this block; a plain Block has none (:meth:`_uses_compiled` is False)."""
        return self._get_cached_op()

    def _runs_compiled(self) -> bool:
        """Whether a call runs as one compiled call (un-optimised graph) even when not hybridized."""
        return False

    # -- persistence ------------------------------------------------------------------------
    def save_parameters(self, filename: str, deduplicate: bool = False) -> None:
        """Save all parameters by structural name to ``filename`` (atomic; ``.npz`` format, or MXNet's
        while ``hybrid.mxnet.install()`` is active). A layer may store some of its parameters under MXNet
        1.x's names (the fused RNN layers: ``_unfused.0.i2h_weight`` for ``l0_i2h_weight``); both names load.

        With ``deduplicate``, a shared parameter is stored once, under its first name.
        """
        save_parameter_file(filename, self._file_params().items(), f"{type(self).__name__}.save_parameters",
                            deduplicate)

    def load_parameters(self, filename: str, device: Any = None, allow_missing: bool = False,
                        ignore_extra: bool = False, cast_dtype: bool = False,
                        dtype_source: str = "current", ctx: Any = None) -> None:
        """Load parameters saved by ``save_parameters``, or an MXNet ``.params`` file (names mapped as
        described in docs/file-formats.md). Nothing is changed unless all checks pass.

        Raises ValueError naming missing/extra names (FormatError, a ValueError, for a
        corrupted file), ShapeError on shape mismatches, TypeError on dtype mismatches
        unless ``cast_dtype`` (then ``dtype_source`` is ``'current'`` to keep the
        parameters' dtypes or ``'saved'`` to adopt the file's).
        """
        self._parameter_loader(filename, None, ctx if device is None else device, allow_missing, ignore_extra,
                               cast_dtype, dtype_source)()

    def _parameter_loader(self, filename: str, data: bytes | None = None, device: Any = None,
                          allow_missing: bool = False, ignore_extra: bool = False, cast_dtype: bool = False,
                          dtype_source: str = "current") -> Callable[[], None]:
        """:meth:`load_parameters` in two phases: read and check everything now (from ``data`` when
        given, the file's bytes), and return the function that applies it (which cannot fail)."""
        params: dict[str, Parameter] = dict(self.collect_params())
        for name, param in self._file_params().items():  # the names save_parameters writes load too
            params.setdefault(name, param)
        return parameter_file_loader(params, filename, data, device, allow_missing, ignore_extra,
                                     cast_dtype, dtype_source, type(self).__name__)

    # -- display ---------------------------------------------------------------------------------
    def __repr__(self) -> str:
        if not self._children:
            return f"{type(self).__name__}()"
        lines = [f"  ({name}): {_indent(repr(child), 2)}" for name, child in self._children.items()]
        return f"{type(self).__name__}(\n" + "\n".join(lines) + "\n)"

    def summary(self, *inputs: Any) -> None:
        """Print a table of every block's output shape and parameter count for ``inputs``."""
        rows: list[tuple[str, str, int]] = []
        counted: set[int] = set()
        totals = {"total": 0, "trainable": 0, "shared": 0}
        handles = []

        def shape_str(tree: Any) -> str:
            shapes = [tuple(x.shape) for x in jax.tree_util.tree_leaves(tree) if hasattr(x, "shape")]
            return str(shapes[0]) if len(shapes) == 1 else str(shapes)

        def hook(block: Block, _args: Any, outputs: Any) -> None:
            n_params = 0
            for param in block._reg_params.values():
                size = int(np.prod(param.shape)) if param.shape else 0
                n_params += size
                totals["total"] += size
                if param.grad_req != "null":
                    totals["trainable"] += size
                if id(param) in counted:
                    totals["shared"] += size
                counted.add(id(param))
            rows.append((f"{type(block).__name__}-{len(rows) + 1}", shape_str(outputs), n_params))

        self.apply(lambda b: handles.append(b.register_forward_hook(hook)))
        try:
            with eager_only(), autograd.pause():
                self(*inputs)
        finally:
            for handle in handles:
                handle.detach()
        unique_total = sum(int(np.prod(p.shape)) for p in self._unique_params() if p.shape)
        width = 80
        lines = ["-" * width, f"{'Layer (type)':>24}{'Output Shape':>42}{'Param #':>14}", "=" * width,
                 f"{'Input':>24}{shape_str(inputs):>42}{0:>14}"]
        lines += [f"{name:>24}{shape:>42}{count:>14}" for name, shape, count in rows]
        lines += ["=" * width,
                  "Parameters in forward computation graph, duplicate included",
                  f"   Total params: {totals['total']}",
                  f"   Trainable params: {totals['trainable']}",
                  f"   Non-trainable params: {totals['total'] - totals['trainable']}",
                  f"Shared params in forward computation graph: {totals['shared']}",
                  f"Unique parameters in model: {unique_total}",
                  "-" * width]
        print("\n".join(lines))


class HybridBlock(Block):
    """A Block whose ``forward`` is pure JAX code and can be compiled with ``hybridize()``.

    Children must be HybridBlocks too.
    """

    _cached_op: CachedOp | None
    _passes: tuple[str, ...]
    # set only on some blocks (read through self.__dict__.get or getattr):
    _remat: Any  # hybridize's remat=
    _recorded_op: CachedOp  # the un-optimised compiled calls
    _runs_compiled_at: tuple[int, bool]  # (_TREE_CHANGES when computed, _runs_compiled's answer)

    def __init__(self, prefix: str | None = None, params: dict[str, Parameter] | None = None):
        super().__init__(prefix=prefix, params=params)
        object.__setattr__(self, "_active", False)
        object.__setattr__(self, "_cached_op", None)
        object.__setattr__(self, "_passes", resolve_passes(None))

    def register_child(self, block: Block, name: str | None = None) -> None:
        if not isinstance(block, HybridBlock):
            raise ValueError(f"{type(self).__name__} is a HybridBlock, so its children must be HybridBlocks too, "
                             f"but {name!r} is a {type(block).__name__}. Use HybridSequential instead of "
                             "Sequential, or make the child a HybridBlock.")
        super().register_child(block, name)

    def hybridize(self, active: bool = True, static_alloc: bool = False, static_shape: bool = False,
                  passes: Any = None, remat: Any = None, inline_limit: int = 2, forward_bulk_size: Any = None,
                  backward_bulk_size: Any = None, partition_if_dynamic: bool = True, **kwargs: Any) -> None:
        """Compile ``forward`` (recursively for children) at the next call.

        The call is traced into hybrid's graph IR, optimised by ``passes`` (names,
        default :data:`hybrid.graph.DEFAULT_PASSES`) and lowered to one XLA
        executable per input signature. ``remat`` trades recomputation for training
        memory: segments of the network keep only their inputs in the forward pass and run again
        in the backward pass (``'sqrt'``, ``'auto'``, a byte budget or a ``hybrid.RematPlan``;
        see docs/memory.md). Raises ValueError for another ``remat``. ``static_alloc`` and
        ``static_shape`` are accepted for Gluon compatibility: XLA programs always have
        static memory plans and shapes. So are Gluon's ``inline_limit``, ``forward_bulk_size``,
        ``backward_bulk_size`` and ``partition_if_dynamic``, with no effect: the whole tree is
        traced into one graph (children always inlined) and XLA schedules and fuses its operations.
        Raises TypeError for another keyword.
        """
        if kwargs:
            raise TypeError(f"HybridBlock.hybridize() got an unexpected keyword argument {next(iter(kwargs))!r}")
        check_remat(remat, f"{type(self).__name__}.hybridize")
        object.__setattr__(self, "_active", bool(active))
        object.__setattr__(self, "_passes", resolve_passes(passes))
        object.__setattr__(self, "_remat", remat)
        self._clear_cached()
        self._changed()
        for child in self._children.values():
            child.hybridize(active, static_alloc=static_alloc, static_shape=static_shape, passes=passes, remat=remat)

    def export(self, path: str, epoch: int = 0) -> tuple[str, str]:
        """Write ``path-symbol.json`` (the traced graphs, predict and train mode, for every input shape
        called since ``hybridize()``) and ``path-EEEE.params``; returns both file names.

        Load them with ``hybrid.SymbolBlock.imports``. Raises RuntimeError before the first
        hybridized call, ``hybrid.export.ExportError`` for graphs with no file form.
        """
        from ._compiled.symbol_export import export_block
        return export_block(self, path, epoch)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Gluon 1.x blocks define ``hybrid_forward`` instead: calls ``hybrid_forward(F, *args, **kwargs,
        **params)``, with ``F`` the MXNet operator namespace (:mod:`hybrid.mxnet.ops`, the same for eager
        and hybridized calls) and ``params`` the block's own parameters' data by registered name. In
        training mode, operators updating auxiliary states (``F.BatchNorm``) write the new running
        statistics to the block's parameters they were given. Raises NotImplementedError when the class
        defines neither."""
        if not self._gluon1:
            raise NotImplementedError(f"{type(self).__name__} must implement forward(self, x, ...) "
                                      "(or Gluon 1.x's hybrid_forward(self, F, x, ...))")
        F = _gluon1._F or _gluon1.operators()
        try:
            params = {name: param.data() for name, param in self._reg_params.items()}
        except DeferredInitializationError:  # shapes inferred from the inputs hybrid_forward gets
            if not self._init_deferred(args, kwargs):
                raise
            params = {name: param.data() for name, param in self._reg_params.items()}
        if _context.current().training:
            states = {id(params[name]): p for name, p in self._reg_params.items() if not p.differentiable}
            if states:
                F = _gluon1.StateWriting(F, states)
        return self.hybrid_forward(F, *args, **kwargs, **params)

    def hybrid_forward(self, F: Any, *args: Any, **kwargs: Any) -> Any:
        """Gluon 1.x's computation: ``F`` is MXNet's operator namespace, ``args`` the inputs (``x, ...``),
        ``kwargs`` hold the block's parameters' data by name. Override it (or ``forward``) in subclasses."""
        raise NotImplementedError(f"{type(self).__name__} must implement forward(self, x, ...) "
                                  "(or Gluon 1.x's hybrid_forward(self, F, x, ...))")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._gluon1 = cls.hybrid_forward is not HybridBlock.hybrid_forward
        if "hybrid_forward" in cls.__dict__ and "forward" not in cls.__dict__:
            # a user's subclass of one of hybrid's layers overriding hybrid_forward runs it, as in Gluon 1.x
            owner = next(base for base in cls.__mro__ if "forward" in base.__dict__)
            if owner is not HybridBlock and owner.__module__.startswith("hybrid.") and \
                    not cls.__module__.startswith("hybrid."):
                cls.forward = HybridBlock.forward  # type: ignore[method-assign]  # hybrid_forward's forward, by design

    _gluon1 = False

    @_structure.generic_infer_shape
    def infer_shape(self, *args: Any, **kwargs: Any) -> None:
        """Fill in unknown parameter shapes from the first inputs. For a ``hybrid_forward`` block: from
        the operators its parameters are passed to (see :mod:`hybrid.gluon1.blocks`); layers override it."""
        if not self._gluon1:
            return super().infer_shape(*args, **kwargs)
        _gluon1.infer_shapes(self, args, kwargs)

    def _get_cached_op(self) -> CachedOp:
        op = self._cached_op
        if op is None:
            op = _cached_op.CachedOp(self, self._passes, getattr(self, "_remat", None))
            object.__setattr__(self, "_cached_op", op)
        return op

    def _runs_compiled(self) -> bool:
        # hybrid's own layers have pure forwards: a tree of them without hooks runs as one compiled
        # call (its un-optimised graph), not operation by operation. The answer is kept while no block
        # changes (the walk over mlp33's 35 blocks costs 23 us per call, the check 0.1 us).
        known = self.__dict__.get("_runs_compiled_at")
        if known is not None and known[0] == _TREE_CHANGES[0]:
            return known[1]
        if self._forward_hooks or self._forward_pre_hooks or not type(self).__module__.startswith("hybrid."):
            answer = False
        else:
            answer = all(child._runs_compiled() for child in self._children.values())
        object.__setattr__(self, "_runs_compiled_at", (_TREE_CHANGES[0], answer))
        return answer

    def _compiled_op(self) -> CachedOp:
        """The compiled calls of this block: the hybridized ones, else un-optimised ones."""
        if self._active:
            return self._get_cached_op()
        op = self.__dict__.get("_recorded_op")
        if op is None:
            op = _cached_op.CachedOp(self, (), None)
            object.__setattr__(self, "_recorded_op", op)
        return op

    def _clear_cached(self) -> None:
        op = self._cached_op
        if op is not None:
            op.invalidate()
        object.__setattr__(self, "_cached_op", None)
