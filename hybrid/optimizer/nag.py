"""NAG: Nesterov accelerated gradient (MXNet's update rule)."""
from __future__ import annotations

from .optimizer import register
from .sgd import SGD

__all__ = ["NAG"]


@register
class NAG(SGD):
    """Nesterov momentum with MXNet's defaults (``learning_rate=0.1``, ``momentum=0.9``).

    With ``g = grad + wd * weight``: ``mom = momentum * mom - lr * g`` and
    ``weight += momentum * mom - lr * g``; ``momentum == 0`` is plain SGD.
    """

    def __init__(self, learning_rate: float = 0.1, momentum: float = 0.9, **kwargs):
        super().__init__(learning_rate=learning_rate, momentum=momentum, nesterov=True, **kwargs)
