"""Gluon keywords with no effect in hybrid warn once when given a non-default value, and stay silent
with their defaults."""
import warnings

import pytest

import hybrid
from hybrid._core import compat as _compat
from hybrid import nn, optimizer


@pytest.fixture(autouse=True)
def fresh():
    _compat._WARNED.clear()
    yield
    _compat._WARNED.clear()


def dense():
    net = nn.Dense(2, in_units=2)
    net.initialize()
    return net.collect_params()


CASES = [
    ("Trainer: kvstore='dist_sync'", lambda: hybrid.Trainer(dense(), "sgd", kvstore="dist_sync")),
    ("Trainer: update_on_kvstore=False", lambda: hybrid.Trainer(dense(), "sgd", update_on_kvstore=False)),
    ("Trainer: compression_params", lambda: hybrid.Trainer(dense(), "sgd", compression_params={"type": "2bit"})),
    ("Embedding: sparse_grad=True", lambda: nn.Embedding(4, 2, sparse_grad=True)),
    ("SGD: lazy_update=True", lambda: optimizer.SGD(lazy_update=True)),
    ("Adam: lazy_update=True", lambda: optimizer.Adam(lazy_update=True)),
    ("DataLoader: pin_memory=True",
     lambda: hybrid.data.DataLoader(hybrid.data.ArrayDataset([1.0, 2.0]), batch_size=1, pin_memory=True)),
]


@pytest.mark.parametrize("message, make", CASES, ids=[c[0].split(":")[1].strip() for c in CASES])
def test_a_non_default_value_warns_once(message, make):
    with pytest.warns(UserWarning, match="has no effect") as record:
        make()
    assert any(str(w.message).startswith(message) for w in record)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make()  # once per keyword


def test_defaults_are_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hybrid.Trainer(dense(), "sgd", kvstore="device")
        nn.Embedding(4, 2)
        optimizer.SGD()
        optimizer.Adam()
        hybrid.data.DataLoader(hybrid.data.ArrayDataset([1.0, 2.0]), batch_size=1)
