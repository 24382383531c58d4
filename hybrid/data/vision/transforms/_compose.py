"""Transforms made of other transforms: Compose, HybridCompose, RandomApply."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ..._rng import transform_rng


def _checked(transforms: Any, who: str) -> list[Callable]:
    if callable(transforms) or isinstance(transforms, (str, bytes)) or not hasattr(transforms, "__iter__"):
        raise TypeError(f"{who}: transforms must be a list of callables, got {type(transforms).__name__}")
    transforms = list(transforms)
    for i, transform in enumerate(transforms):
        if not callable(transform):
            raise TypeError(f"{who}: transform {i} ({transform!r}) is not callable")
    return transforms


class Compose:
    """Applies ``transforms`` in order: ``Compose([Resize(32), ToTensor()])``.

    Raises TypeError when ``transforms`` is not a list of callables.
    """

    def __init__(self, transforms: Sequence[Callable]):
        self._transforms = _checked(transforms, type(self).__name__)

    def __call__(self, x: Any) -> Any:
        for transform in self._transforms:
            x = transform(x)
        return x

    def __len__(self) -> int:
        return len(self._transforms)

    def __getitem__(self, i: int) -> Callable:
        return self._transforms[i]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._transforms!r})"


class HybridCompose(Compose):
    """Gluon's ``HybridCompose``: the same as ``Compose`` here.

    Gluon needs HybridBlocks so it can hybridize the chain; these transforms are
    NumPy callables, so every callable is accepted and nothing is compiled.
    """


class RandomApply:
    """Applies ``transforms`` (a callable or a list, run in order) with probability ``p``.

    Raises ValueError when ``p`` is outside [0, 1], TypeError for non-callables.
    """

    def __init__(self, transforms: Callable | Sequence[Callable], p: float = 0.5):
        if not callable(transforms):
            transforms = Compose(_checked(transforms, "RandomApply"))
        if not 0 <= p <= 1:
            raise ValueError(f"RandomApply: p must be a probability in [0, 1], got {p!r}")
        self.transforms, self.p = transforms, float(p)

    def __call__(self, x: Any) -> Any:
        if self.p < transform_rng().random():
            return x
        return self.transforms(x)

    def __repr__(self) -> str:
        return f"RandomApply({self.transforms!r}, p={self.p})"
