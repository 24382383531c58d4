"""Training checkpoints: bit-identical resume, atomic saves, verification, retention."""
import os
import pathlib

import numpy as np
import pytest

import hybrid
from hybrid import Trainer, autograd, nn
from hybrid.export import FormatError, list_checkpoints, load_checkpoint, save_checkpoint

from helpers import batch, make_net, snapshot


def train(net, trainer, steps):
    loss_fn = hybrid.loss.SoftmaxCELoss()
    losses = []
    for step in steps:
        x, y = batch(step)
        with autograd.record():
            loss = loss_fn(net(x), y)
        autograd.backward(loss)
        trainer.step(6)
        losses.append(np.asarray(loss))
    return losses


def test_resume_continues_training_bit_identically(tmp_path):
    net = make_net(0)
    trainer = Trainer(net.collect_params(), "adam", {"learning_rate": 0.01})
    train(net, trainer, range(3))
    save_checkpoint(tmp_path, net, trainer, step=3, epoch=1, extra={"data_position": 3})
    straight = train(net, trainer, range(3, 6))

    # resume in the same network after moving on, with a fresh trainer and another random state:
    # everything that shaped the straight run must come back from the checkpoint
    other = net
    other_trainer = Trainer(other.collect_params(), "adam", {"learning_rate": 0.5})
    hybrid.random.seed(99)
    expected = snapshot(net)
    meta = load_checkpoint(tmp_path, other, other_trainer)
    assert (meta["step"], meta["epoch"], meta["extra"]) == (3, 1, {"data_position": 3})
    assert other_trainer.learning_rate == 0.01
    resumed = train(other, other_trainer, range(meta["extra"]["data_position"], 6))
    for a, b in zip(straight, resumed):
        np.testing.assert_array_equal(a, b)  # dropout masks, Adam states and BatchNorm statistics all resume
    for name, value in snapshot(other).items():
        np.testing.assert_array_equal(value, expected[name])


def test_interrupted_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    net = make_net(0)
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    train(net, trainer, range(1))
    first = save_checkpoint(tmp_path, net, trainer, step=1)
    saved = snapshot(net)
    train(net, trainer, range(1, 2))

    def crash(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Trainer, "save_states", crash)  # dies after the parameters were written
    with pytest.raises(OSError, match="No space left"):
        save_checkpoint(tmp_path, net, trainer, step=2)
    monkeypatch.setattr(Trainer, "save_states", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path, net, trainer, step=1, overwrite=True)  # replacing, then interrupted
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(first)]  # no partial directory, no temporary left
    assert list_checkpoints(tmp_path) == [(1, first)]
    fresh = make_net(5)
    assert load_checkpoint(tmp_path, fresh)["step"] == 1
    for name, value in snapshot(fresh).items():
        np.testing.assert_array_equal(value, saved[name])


def test_corrupted_checkpoints_are_detected_before_anything_changes(tmp_path):
    net = make_net(0)
    path = save_checkpoint(tmp_path, net, step=4)
    params = os.path.join(path, "params.npz")
    data = bytearray(open(params, "rb").read())
    data[-40] ^= 1
    open(params, "wb").write(bytes(data))
    other = make_net(1)
    before = snapshot(other)
    with pytest.raises(FormatError, match="params.npz does not match its checksum"):
        load_checkpoint(tmp_path, other)
    for name, value in snapshot(other).items():
        np.testing.assert_array_equal(value, before[name])
    manifest = pathlib.Path(path) / "checkpoint.json"
    manifest.write_text(manifest.read_text().replace('"step": 4', '"step": 5'))
    with pytest.raises(FormatError, match="checksum mismatch"):
        load_checkpoint(tmp_path, other)
    with pytest.raises(ValueError, match="saved without trainer states"):
        save_checkpoint(tmp_path, net, step=6)
        load_checkpoint(tmp_path, other, Trainer(other.collect_params(), "sgd"))


def test_retention_selection_and_argument_errors(tmp_path):
    net = make_net(0)
    for step in (10, 20, 30, 40):
        save_checkpoint(tmp_path, net, step=step, keep=2)
    assert [step for step, _ in list_checkpoints(tmp_path)] == [30, 40]
    assert load_checkpoint(tmp_path, net)["step"] == 40
    assert load_checkpoint(tmp_path, net, step=30)["step"] == 30
    with pytest.raises(FileNotFoundError, match=r"no checkpoint for step 10; available: \[30, 40\]"):
        load_checkpoint(tmp_path, net, step=10)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save_checkpoint(tmp_path, net, step=40)
    with pytest.raises(ValueError, match="numbers must be finite"):
        save_checkpoint(tmp_path, net, step=50, extra={"loss": float("nan")})
    with pytest.raises(ValueError, match="step must be a non-negative integer"):
        save_checkpoint(tmp_path, net, step=-1)
    with pytest.raises(FileNotFoundError, match="no checkpoints"):
        load_checkpoint(tmp_path / "empty", net)


def test_scheduled_learning_rate_resumes_from_the_update_count(tmp_path):
    net = make_net(0)

    def scheduled():
        schedule = hybrid.lr_scheduler.FactorScheduler(step=2, factor=0.5)
        return Trainer(net.collect_params(), "sgd", {"learning_rate": 0.8, "lr_scheduler": schedule})

    trainer = scheduled()
    train(net, trainer, range(5))
    save_checkpoint(tmp_path, net, trainer, step=5)
    resumed = scheduled()
    load_checkpoint(tmp_path, net, resumed)
    assert resumed.optimizer.num_update == 5
    assert resumed.learning_rate == trainer.learning_rate < 0.8


def test_keep_removes_the_oldest_writes_never_the_new_checkpoint(tmp_path):
    """Checkpoints with higher steps from an earlier run are older writes: keep=N removes them, and the
    checkpoint just written survives and is the one loaded."""
    old_run = make_net(0)
    for step in (50, 60):
        save_checkpoint(tmp_path, old_run, step=step)
    net = make_net(1)
    written = save_checkpoint(tmp_path, net, step=10, keep=1)
    assert os.path.isdir(written)
    assert list_checkpoints(tmp_path) == [(10, written)]
    fresh = make_net(2)
    assert load_checkpoint(tmp_path, fresh)["path"] == written
    for name, value in snapshot(fresh).items():
        np.testing.assert_array_equal(value, snapshot(net)[name])
    # keep=2 counts the new write and the most recent before it
    second = save_checkpoint(tmp_path, net, step=5, keep=2)
    assert list_checkpoints(tmp_path) == [(5, second), (10, written)]
    assert load_checkpoint(tmp_path, fresh)["step"] == 5  # the most recent write
    # overwriting a step replaces it without a moment where the step is missing
    again = save_checkpoint(tmp_path, net, step=10, overwrite=True, extra={"v": 2})
    assert again != written and not os.path.exists(written)
    assert load_checkpoint(tmp_path, fresh, step=10)["extra"] == {"v": 2}


def test_a_refused_load_changes_nothing(tmp_path):
    net = make_net(0)
    trainer = Trainer(net.collect_params(), "adam", {"learning_rate": 0.05})
    train(net, trainer, range(2))
    save_checkpoint(tmp_path, net, trainer, step=1)
    other = nn.HybridSequential()  # a different network: its parameters do not fit
    other.add(nn.Dense(5, in_units=4))
    other.initialize()
    other_trainer = Trainer(net.collect_params(), "adam", {"learning_rate": 0.5})
    before = snapshot(other)
    hybrid.random.seed(123)
    random_before = hybrid.random.get_state()
    with pytest.raises(ValueError):
        load_checkpoint(tmp_path, other, other_trainer)
    assert other_trainer.learning_rate == 0.5 and other_trainer._states == {}
    assert other_trainer.optimizer.num_update == 0
    assert hybrid.random.get_state() == random_before
    for name, value in snapshot(other).items():
        np.testing.assert_array_equal(value, before[name])


@pytest.mark.parametrize("extra, message", [
    ({1: "a", "b": 2}, r"key 1 of type int; keys must be strings"),
    ({"deep": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[0]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]},
     "nested deeper than"),
    ({"x": {1, 2}}, r"extra\['x'\] is a set"),
    ({"loss": float("inf")}, "numbers must be finite"),
])
def test_extra_is_validated_when_saving(tmp_path, extra, message):
    with pytest.raises(ValueError, match=message):
        save_checkpoint(tmp_path, make_net(0), step=1, extra=extra)
    assert list_checkpoints(tmp_path) == []


def test_concurrent_saves_and_loads_stay_consistent(tmp_path):
    """A stress test: writers overwrite one step and save new ones with keep=1 while readers load; every
    load returns one checkpoint's parameters together with that checkpoint's extra."""
    import threading
    import time
    nets = [make_net(seed) for seed in range(3)]
    signature = {seed: float(np.asarray(net[0].weight.data()).sum()) for seed, net in enumerate(nets)}
    save_checkpoint(tmp_path, nets[0], step=0, extra={"seed": 0})
    errors, loads = [], []
    stop = time.monotonic() + 3.0

    def write(seed):
        step = 0
        try:
            while time.monotonic() < stop:
                save_checkpoint(tmp_path, nets[seed], step=0, extra={"seed": seed}, overwrite=True)
                step += 1
                save_checkpoint(tmp_path, nets[seed], step=step * 3 + seed, extra={"seed": seed}, keep=2,
                                overwrite=True)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    def read():
        reader = make_net(9)
        try:
            while time.monotonic() < stop:
                meta = load_checkpoint(tmp_path, reader)
                got = float(np.asarray(reader[0].weight.data()).sum())
                loads.append(got == signature[meta["extra"]["seed"]])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=write, args=(s,)) for s in (1, 2)] + \
        [threading.Thread(target=read) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(loads) > 10 and all(loads)
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]  # no temporaries left


def test_concurrent_parameter_file_saves_and_loads_stay_consistent(tmp_path):
    """save_parameters replaces the file atomically: a concurrent load_parameters reads one whole file."""
    import threading
    import time
    nets = [make_net(seed) for seed in range(3)]
    signatures = {float(np.asarray(net[0].weight.data()).sum()) for net in nets}
    path = str(tmp_path / "net.params")
    nets[0].save_parameters(path)
    errors, loads = [], []
    stop = time.monotonic() + 2.0

    def write(net):
        try:
            while time.monotonic() < stop:
                net.save_parameters(path)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    def read():
        reader = make_net(9)
        try:
            while time.monotonic() < stop:
                reader.load_parameters(path)
                loads.append(float(np.asarray(reader[0].weight.data()).sum()) in signatures)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=write, args=(n,)) for n in nets[1:]] + \
        [threading.Thread(target=read) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(loads) > 10 and all(loads)
    assert os.listdir(tmp_path) == ["net.params"]
