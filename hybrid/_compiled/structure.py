"""Structural keys of blocks: what decides the program a block's forward compiles to.

Two blocks with equal keys trace to the same graph for the same inputs, so they can share one
compiled program, with their own parameters passed as its inputs. The key holds the block's
class, its plain attributes (numbers, strings, tuples of them, dtypes, classes, module-level
functions), its parameters' shapes, dtypes, ``grad_req`` and placement, which parameters are
the same object, and its children's keys by name. A block whose program might depend on
anything else (an array or a container attribute, a per-instance function, a hook, a parameter
whose shape is not known yet) has no key: it keeps programs of its own.

Paths locate the parameters and blocks a program reads or writes, so that a program traced from
one block can be bound to another of equal structure.
"""
from __future__ import annotations

import enum
import sys
import types
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from .._core.lazy import LazyArray

__all__ = ["structure_key", "paths_of", "block_at", "deferred_leaf", "generic_infer_shape", "Paths"]

# Attributes that name, cache or bookkeep; they do not change what a forward computes. Children and
# parameters are keyed from ``_children`` and ``_reg_params``.
_BOOKKEEPING = frozenset({
    "_children", "_reg_params", "_forward_hooks", "_forward_pre_hooks", "_scope_name", "_name", "_prefix",
    "_watcher_set", "_cached_op", "_recorded_op", "_scope_counts", "_shared_params", "_gluon1_params",
    "_runs_compiled_at",
})
_ATOMS = frozenset({type(None), bool, int, float, complex, str, bytes, np.dtype, range, slice,
                    type(Ellipsis), type(NotImplemented)})
_CONTAINERS = (tuple, frozenset)
_NO_KEY = None


def _named_global(value: Any) -> bool:
    """Whether ``value`` is reachable by its module and qualified name (a module-level function, class,
    jitted function or ufunc): one object for every block that refers to it."""
    module = sys.modules.get(getattr(value, "__module__", None) or "")
    qualname = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if module is None or not isinstance(qualname, str) or "<" in qualname:
        return False
    found: Any = module
    for part in qualname.split("."):
        found = getattr(found, part, _NO_KEY)
        if found is _NO_KEY:
            return False
    return found is value


def plain_key(value: Any, depth: int = 0) -> Hashable | None:
    """A hashable key equal for values that a forward cannot tell apart, or None when ``value`` is not a
    plain value (arrays, lists, dicts, per-instance functions, other objects)."""
    kind = type(value)
    if kind in _ATOMS:
        return (kind, value)  # the type too: 1, 1.0 and True are equal keys otherwise
    if kind in _CONTAINERS and depth < 8:
        items = [plain_key(item, depth + 1) for item in value]
        if any(item is None for item in items):
            return None
        return (kind, tuple(items) if kind is tuple else frozenset(items))
    if isinstance(value, np.generic):
        return (kind, value.item())
    if isinstance(value, enum.Enum):
        return (kind, value)
    if isinstance(value, type) or (callable(value) and not isinstance(value, types.MethodType)
                                   and _named_global(value)):
        return ("global", value)
    return None


def _param_key(param: Any, seen: dict) -> Hashable | None:
    data = param.own_data
    if data is None:  # deferred or uninitialised: its program would have to initialise it
        return None
    index = seen.setdefault(id(param), len(seen))
    placement = None if isinstance(data, LazyArray) else getattr(data, "sharding", None)  # (not computed for it)
    return (type(param), index, tuple(data.shape), np.dtype(data.dtype), param.grad_req, param.differentiable,
            placement)


def _block_key(block: Any, seen: dict) -> Hashable | None:
    state = block.__dict__
    if state.get("_forward_hooks") or state.get("_forward_pre_hooks"):
        return None  # hooks run while tracing: each block's own
    children, params = state.get("_children", {}), state.get("_reg_params", {})
    attributes = []
    for name in sorted(state):
        if name in _BOOKKEEPING:
            continue
        value = state[name]
        if name in children or name in params:
            if value is not children.get(name) and value is not params.get(name):
                return None
            continue
        key = plain_key(value)
        if key is None:
            return None
        attributes.append((name, key))
    param_keys = _named_keys(params, _param_key, seen)
    child_keys = _named_keys(children, _block_key, seen) if param_keys is not None else None
    if child_keys is None:
        return None
    return (type(block), tuple(attributes), param_keys, child_keys)


def _named_keys(named: dict, key_of: Any, seen: dict) -> tuple | None:
    """``((name, key_of(value, seen)), ...)`` in ``named``'s order, or None when one value has no key."""
    keys = []
    for name, value in named.items():
        key = key_of(value, seen)
        if key is None:
            return None
        keys.append((name, key))
    return tuple(keys)


def structure_key(block: Any) -> Hashable | None:
    """The structural key of ``block`` and its subtree, or None when equality cannot be proven."""
    try:
        return _block_key(block, {})
    except (TypeError, AttributeError):  # an unhashable part, or not a Block as expected
        return None


def generic_infer_shape(method: Callable) -> Callable:
    """Mark ``method`` as a base class's ``infer_shape`` that no layer wrote for itself (Block's and
    HybridBlock's): a block inheriting it infers no shapes by a method of its own."""
    method.generic_infer_shape = True  # type: ignore[attr-defined]
    return method


def deferred_leaf(block: Any) -> bool:
    """Whether ``block`` has parameters waiting for their shapes, all of them its own (not its
    children's), and infers them from its inputs by a method of its own (so they can be initialised
    before tracing, as the trace would)."""
    if not any(p.is_deferred for p in block.__dict__.get("_reg_params", {}).values()):
        return False
    if getattr(type(block).infer_shape, "generic_infer_shape", False):
        return False
    descendants: list = []
    for child in block._children.values():
        child.apply(descendants.append)
    return not any(p.is_deferred for child in descendants for p in child._reg_params.values())


def _block_paths(root: Any) -> dict[int, str]:
    paths: dict[int, str] = {}

    def visit(block: Any, path: str) -> None:
        paths.setdefault(id(block), path)
        for name, child in block._children.items():
            visit(child, f"{path}.{name}" if path else name)

    visit(root, "")
    return paths


def block_at(root: Any, path: str) -> Any:
    """The block at the structural ``path`` below ``root`` (``''``: root). Raises KeyError if absent."""
    block = root
    if path:
        for part in path.split("."):
            block = block._children[part]
    return block


def named_params(root: Any) -> dict[str, Any]:
    """Every parameter of ``root``'s tree by structural name (shared ones under each name)."""
    out: dict[str, Any] = {}
    root._collect_params_with_prefix("", out)
    return out


class Paths:
    """Where a traced program's parameters, written parameters, and attributes are in a block tree."""

    __slots__ = ("params", "states", "attributes", "attr_inputs")

    def __init__(self, params: list[str], states: list[str], attributes: list[tuple[str, str]],
                 attr_inputs: list[tuple[str, str]]):
        self.params, self.states, self.attributes, self.attr_inputs = params, states, attributes, attr_inputs

    def resolve(self, root: Any) -> tuple[list, list, list, list] | None:
        """The objects at these paths in ``root``'s tree, or None when one is missing."""
        try:
            named = named_params(root)
            return ([named[p] for p in self.params], [named[p] for p in self.states],
                    [(block_at(root, path), name) for path, name in self.attributes],
                    [(block_at(root, path), name) for path, name in self.attr_inputs])
        except KeyError:
            return None


def paths_of(root: Any, params: Sequence, states: Sequence, attributes: Sequence,
             attr_inputs: Sequence) -> Paths | None:
    """The paths of the objects a program of ``root`` uses, or None when one is outside its tree."""
    by_id: dict[int, str] = {}
    for name, param in named_params(root).items():
        by_id.setdefault(id(param), name)
    blocks = _block_paths(root)
    try:
        return Paths([by_id[id(p)] for p in params], [by_id[id(p)] for p in states],
                     [(blocks[id(b)], name) for b, name in attributes],
                     [(blocks[id(b)], name) for b, name in attr_inputs])
    except KeyError:
        return None
