"""Argument checks and named model constructors shared by the model families."""
from __future__ import annotations

import os
from typing import Any, Callable

import jax


def check_classes(layer: str, classes: Any) -> int:
    """``classes`` as an int, or ValueError naming the model."""
    if isinstance(classes, bool) or not isinstance(classes, int) or classes <= 0:
        raise ValueError(f"{layer}: classes must be a positive integer, got {classes!r}")
    return classes


def no_pretrained(name: str, pretrained: bool, root: Any = None, ctx: Any = None, device: Any = None) -> None:
    """Gluon's ``pretrained=True`` downloads weights; hybrid ships none (ValueError).

    ``root`` (Gluon's cache directory of pretrained weights, a path or None) is accepted for compatibility
    and ignored, since nothing is downloaded; TypeError when it is not a path. ``device`` (Gluon 1.x:
    ``ctx``), where Gluon puts pretrained weights, is accepted: None, a ``jax.Device`` or a list of them
    (TypeError otherwise); with no weights to load the model is built uninitialised, and
    ``net.initialize(device=...)`` places its parameters.
    """
    if root is not None and not isinstance(root, (str, bytes, os.PathLike)):
        raise TypeError(f"{name}: root must be a directory path or None, got {type(root).__name__}")
    for keyword, value in (("ctx", ctx), ("device", device)):
        values = value if isinstance(value, (list, tuple)) else [value]
        if value is not None and not all(isinstance(v, jax.Device) for v in values):
            raise TypeError(f"{name}: {keyword} must be a jax.Device, a list of them or None, got {value!r}")
    if pretrained:
        raise ValueError(f"{name}: no pretrained weights are shipped; build the model and load a parameter file "
                         "with net.load_parameters(path)")


def named_builder(name: str, doc: str, factory: Callable[..., Any], **fixed: Any) -> Callable[..., Any]:
    """A function ``name(**kwargs)`` returning ``factory(**fixed, **kwargs)``, documented by ``doc``."""
    def build(**kwargs: Any) -> Any:
        return factory(**fixed, **kwargs)
    build.__name__ = build.__qualname__ = name
    build.__module__ = factory.__module__   # bound there, beside its factory: pickle and doc tools find it
    build.__doc__ = doc
    return build
