"""Optimizers usable by name in ``Trainer`` (or an optax transformation through :class:`Optax`)."""
from .adadelta import AdaDelta
from .adagrad import AdaGrad
from .adam import Adam
from .adamw import AdamW
from .lamb import LAMB
from .nag import NAG
from .optax_adapter import Optax
from .optimizer import Optimizer, create, register
from .rmsprop import RMSProp
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "NAG", "Adam", "AdamW", "RMSProp", "AdaGrad", "AdaDelta", "LAMB", "Optax",
           "create", "register"]
