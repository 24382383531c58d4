"""Tape.stage_update: an optimizer update handed to the recording, which stages it, donates what only
its owner holds, runs the step and ends (the trainer never sees a slot)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hybrid._core import lazy as _lazy
from hybrid import autograd
from hybrid.errors import AutogradError


class Owner:
    """Holds a weight and a state, as a trainer and its parameters do."""

    def __init__(self):
        self.weight = jnp.asarray(np.arange(4, dtype=np.float32))
        self.state = jnp.zeros(4, jnp.float32)


def sgd(w, g, m, lr):
    m = 0.9 * m + g
    return [w - lr * m, m]


def _staged_step(owner, keep_old_weight=False):
    tape = _lazy.Tape(_lazy.current_trace())
    with _lazy.recording_trace(tape):
        (grad,) = tape.call(lambda w: [2.0 * w], ("call", "double"), [owner.weight],
                            [jax.core.ShapedArray((4,), jnp.float32)])
    held = owner.weight if keep_old_weight else None
    stored = []

    def store(values):
        stored.append(values)
        owner.weight, owner.state = values

    avals = [jax.core.ShapedArray((4,), jnp.float32)] * 2
    tape.stage_update(owner, sgd, "sgd", [owner.weight], [grad], [owner.state], [jnp.float32(0.5)], avals, store)
    return tape, stored, held


def test_update_runs_the_step_and_stores_its_results():
    owner = Owner()
    w0 = np.arange(4, dtype=np.float32)
    tape, stored, _ = _staged_step(owner)
    assert tape.released and len(stored) == 1
    m = 2.0 * w0  # momentum from zero: the gradient
    np.testing.assert_allclose(np.asarray(owner.state), m)
    np.testing.assert_allclose(np.asarray(owner.weight), w0 - 0.5 * m)
    with pytest.raises(AutogradError, match="recording ended"):
        tape.add("call", sgd, None, [], [], "x")


def _donated_last() -> tuple:
    return next(reversed(_lazy._PROGRAMS)).donate


def test_old_buffers_are_donated_unless_someone_else_holds_them():
    _staged_step(Owner())
    assert len(_donated_last()) == 2  # the old weight and state: only the owner held them
    owner = Owner()
    old_state = owner.state  # a second holder of the state
    _, _, held = _staged_step(owner, keep_old_weight=True)
    assert _donated_last() == ()
    np.testing.assert_allclose(np.asarray(held), np.arange(4, dtype=np.float32))  # kept with its values
    np.testing.assert_allclose(np.asarray(old_state), 0.0)
    owner = Owner()
    _, _, held = _staged_step(owner, keep_old_weight=True)
    assert len(_donated_last()) == 1  # the state only
