"""``install()``: make ``import mxnet`` (and every ``mxnet.<sub>`` import) resolve to ``hybrid.mxnet``.

After ``hybrid.mxnet.install()``, ``import mxnet as mx``, ``from mxnet.gluon import nn`` and
``from mxnet.gluon.nn import BatchNorm`` give hybrid's modules and classes, so model files written for
MXNet 1.x import unchanged. ``mxnet.X.Y`` maps to the module ``hybrid.mxnet.X.Y``, or to the attribute
``Y`` of ``hybrid.mxnet.X`` (an operator namespace such as ``mxnet.ndarray.contrib``) wrapped as a module.
``uninstall()`` removes the alias and every ``mxnet.*`` entry it put in ``sys.modules``.
While installed, parameter files (``save_parameters``, ``ParameterDict.save``) are written in MXNet's
``.params`` format, so MXNet reads what the code saves (hybrid reads both formats).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

from ..formats import params_file

__all__ = ["install", "uninstall", "is_installed"]

_ALIAS = "mxnet"
_TARGET = "hybrid.mxnet"


class _NamespaceModule(types.ModuleType):
    """A module standing for an attribute that is not a module (``mxnet.symbol.contrib`` -> ``F.contrib``)."""

    def __init__(self, name: str, target: Any):
        super().__init__(name, getattr(target, "__doc__", None))
        object.__setattr__(self, "_target", target)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_target"), name)

    def __dir__(self) -> list[str]:
        return dir(object.__getattribute__(self, "_target"))


# MXNet 1.x modules whose content hybrid.mxnet keeps in their parent (mxnet.image.image's helpers are in
# hybrid.mxnet.image)
_SAME_AS = {"mxnet.image.image": "hybrid.mxnet.image"}


def _resolve(fullname: str) -> types.ModuleType | None:
    """The module ``mxnet.a.b`` stands for: the submodule ``b`` of what ``mxnet.a`` stands for (which may be
    a module outside ``hybrid.mxnet``: ``mxnet.gluon.data`` is ``hybrid.data``), else its attribute ``b``."""
    if fullname == _ALIAS:
        return importlib.import_module(_TARGET)
    if fullname in _SAME_AS:
        return importlib.import_module(_SAME_AS[fullname])
    parent_alias, _, attribute = fullname.rpartition(".")
    parent = sys.modules.get(parent_alias) or _resolve(parent_alias)
    if parent is None:
        return None
    if hasattr(parent, "__path__"):  # a package: its submodule, when it has one
        target = f"{parent.__name__}.{attribute}"
        try:
            return importlib.import_module(target)
        except ModuleNotFoundError as exc:
            if exc.name != target:
                raise
    value = getattr(parent, attribute, None)
    if value is None:
        return None
    return value if isinstance(value, types.ModuleType) else _NamespaceModule(fullname, value)


class _Loader(importlib.abc.Loader):
    def __init__(self, module: types.ModuleType):
        self.module = module
        self.original_spec = getattr(module, "__spec__", None)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return self.module

    def exec_module(self, module: types.ModuleType) -> None:
        if self.original_spec is not None:  # importlib replaced it with the alias's spec
            module.__spec__ = self.original_spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds ``mxnet`` and ``mxnet.*`` as the corresponding modules of ``hybrid.mxnet``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != _ALIAS and not fullname.startswith(_ALIAS + "."):
            return None
        module = _resolve(fullname)
        if module is None:
            return None
        # every alias is a package, so that mxnet.symbol.contrib resolves below the module hybrid.mxnet.symbol
        return importlib.machinery.ModuleSpec(fullname, _Loader(module), is_package=True)


_finder = _AliasFinder()
_previous_format = ["npz"]  # the parameter file format before install()


def is_installed() -> bool:
    """True while ``import mxnet`` resolves to ``hybrid.mxnet``."""
    return _finder in sys.meta_path


def install() -> types.ModuleType:
    """Make ``import mxnet`` (and ``mxnet.gluon``, ``mxnet.gluon.nn``, ``mxnet.nd``, ...) give ``hybrid.mxnet``.

    Parameter files are written in MXNet's format until :func:`uninstall`. Returns the ``hybrid.mxnet``
    module. Idempotent. Raises RuntimeError when the real MXNet is already
    imported in this process (its modules would be mixed with hybrid's).
    """
    existing = sys.modules.get(_ALIAS)
    target = importlib.import_module(_TARGET)
    if existing is not None and existing is not target:
        raise RuntimeError("hybrid.mxnet.install(): the real 'mxnet' package is already imported in this process; "
                           "install the alias before anything imports mxnet, or use 'import hybrid.mxnet as mx'")
    if not is_installed():
        sys.meta_path.insert(0, _finder)
        _previous_format[0] = params_file.set_write_format("mxnet")
    sys.modules[_ALIAS] = target
    return target


def uninstall() -> None:
    """Undo :func:`install`: ``import mxnet`` finds the real package again (or fails if there is none)."""
    if is_installed():
        params_file.set_write_format(_previous_format[0])
    while _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    for name in [n for n in sys.modules if n == _ALIAS or n.startswith(_ALIAS + ".")]:
        module = sys.modules[name]
        if isinstance(module, _NamespaceModule) or getattr(module, "__name__", "").startswith(_TARGET):
            del sys.modules[name]
