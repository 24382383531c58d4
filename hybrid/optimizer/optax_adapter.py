"""Adapter running any optax ``GradientTransformation`` inside the Trainer's compiled update."""
from __future__ import annotations

from typing import Any

import jax

from .optimizer import Optimizer, register

__all__ = ["Optax"]

_GLOBAL = -1  # tag of optimizer-state leaves that belong to no single parameter (e.g. step counts)


class _Owner:
    """Leaf marker: index of the parameter a state leaf belongs to, or ``_GLOBAL``."""

    def __init__(self, index: int):
        self.index = index


@register
class Optax(Optimizer):
    """Wraps an optax ``GradientTransformation`` (needs the ``optax`` extra).

    ``Trainer(params, optax.adamw(1e-3))`` and ``Trainer(params, Optax(tx))`` are the same.
    The transformation sees the gradients of all parameters of a step together (so
    ``optax.clip_by_global_norm`` works) after ``rescale_grad`` and ``clip_gradient``; ``wd``
    (default 0) adds ``wd * weight`` to them first. The weight update is
    ``weight += lr * update``, where ``lr`` is this optimizer's learning rate (default 1.0,
    so the transformation's own step size rules) times the parameter's ``lr_mult``.

    The transformation's state is kept per parameter: parts that mirror the parameters are
    split, the other parts (step counts) are copied to every parameter and, when parameters
    skipped with ``ignore_stale_grad`` disagree, taken from the first one of a step.

    Raises:
        ImportError: optax is not installed.
        TypeError: ``transformation`` has no ``init``/``update``.
    """

    def __init__(self, transformation: Any, learning_rate: float = 1.0, **kwargs: Any):
        try:
            import optax  # noqa: F401  (fail here, not inside a trace)
        except ImportError as exc:
            raise ImportError("Optax: the optax package is required (pip install 'hybrid[optax]')") from exc
        if not (callable(getattr(transformation, "init", None)) and callable(getattr(transformation, "update", None))):
            raise TypeError(f"Optax: expected an optax GradientTransformation (with init and update), "
                            f"got {type(transformation).__name__}")
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.transformation = transformation

    def create_state(self, weight):
        return self._split(self.transformation.init([weight]), [weight])[0]

    def update_all(self, weights, grads, states, lrs, wds):
        grads = [g + wd * w for g, w, wd in zip(grads, weights, wds)]
        updates, full_state = self.transformation.update(grads, self._merge(states, weights), weights)
        new_weights = [w + lr * u.astype(w.dtype) for w, u, lr in zip(weights, updates, lrs)]
        return new_weights, self._split(full_state, weights)

    # -- per-parameter view of the transformation's state ----------------------------------
    def _owners(self, weights: list) -> tuple[Any, list[int]]:
        """Tree structure of the state for ``weights`` and the owner of each of its leaves."""
        import optax

        shapes = [jax.ShapeDtypeStruct(w.shape, w.dtype) for w in weights]
        abstract = jax.eval_shape(self.transformation.init, shapes)
        try:
            owners = optax.tree_map_params(
                self.transformation, lambda _, index: _Owner(index), abstract, list(range(len(weights))),
                transform_non_params=lambda sub: jax.tree_util.tree_map(lambda _: _Owner(_GLOBAL), sub))
        except Exception as exc:  # init that computes on its parameters cannot be traced with a placeholder
            raise TypeError(f"Optax: cannot tell which parts of the state of {self.transformation!r} belong to "
                            f"which parameter ({exc})") from exc
        return jax.tree_util.tree_structure(abstract), [o.index for o in jax.tree_util.tree_leaves(owners)]

    def _split(self, full_state: Any, weights: list) -> list[tuple]:
        _, owners = self._owners(weights)
        leaves = jax.tree_util.tree_leaves(full_state)
        return [tuple(leaf for leaf, owner in zip(leaves, owners) if owner in (_GLOBAL, i))
                for i in range(len(weights))]

    def _merge(self, states: list, weights: list) -> Any:
        treedef, owners = self._owners(weights)
        streams = [iter(state) for state in states]
        leaves = []
        for owner in owners:
            if owner == _GLOBAL:
                leaves.append([next(stream) for stream in streams][0])
            else:
                leaves.append(next(streams[owner]))
        return jax.tree_util.tree_unflatten(treedef, leaves)
