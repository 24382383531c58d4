"""Optimizers usable by name in ``Trainer`` (or an optax transformation through :class:`Optax`)."""
from .adadelta import AdaDelta
from .adagrad import AdaGrad
from .adam import Adam
from .adamax import Adamax
from .adamw import AdamW
from .dcasgd import DCASGD
from .ftml import FTML
from .ftrl import Ftrl
from .lamb import LAMB
from .nadam import Nadam
from .nag import NAG
from .optax_adapter import Optax
from .optimizer import Optimizer, create, register
from .rmsprop import RMSProp
from .sgd import SGD, ccSGD
from .signum import Signum

__all__ = ["Optimizer", "SGD", "ccSGD", "NAG", "Adam", "AdamW", "RMSProp", "AdaGrad", "AdaDelta", "LAMB", "Signum",
           "FTML", "Ftrl", "Adamax", "Nadam", "DCASGD", "Optax", "create", "register"]
