"""Optimizers usable by name in ``Trainer``."""
from .adam import Adam
from .optimizer import Optimizer, create, register
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "create", "register"]
