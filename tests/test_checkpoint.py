"""Training checkpoints: bit-identical resume, atomic saves, verification, retention."""
import os

import numpy as np
import pytest

import hybrid
from hybrid import Trainer, autograd, nn
from hybrid.export import FormatError, list_checkpoints, load_checkpoint, save_checkpoint


def make_net(seed):
    hybrid.random.seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="relu"), nn.BatchNorm(), nn.Dropout(0.4), nn.Dense(3))
    net.initialize(hybrid.init.Xavier())
    net.hybridize()
    net(np.zeros((2, 4), np.float32))
    return net


def batch(step):
    """Data that depends only on the step, as a resumable data pipeline provides it."""
    rng = np.random.default_rng(step)
    return rng.standard_normal((6, 4)).astype(np.float32), rng.integers(0, 3, 6)


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


def snapshot(net):
    return {name: np.asarray(p.data()).copy() for name, p in net.collect_params().items()}


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
    assert sorted(os.listdir(tmp_path)) == ["ckpt-00000001"]  # no partial directory, no temporary left
    assert list_checkpoints(tmp_path) == [(1, first)]
    fresh = make_net(5)
    assert load_checkpoint(tmp_path, fresh)["step"] == 1
    for name, value in snapshot(fresh).items():
        np.testing.assert_array_equal(value, saved[name])


def test_corrupted_checkpoints_are_detected_before_anything_changes(tmp_path):
    net = make_net(0)
    save_checkpoint(tmp_path, net, step=4)
    params = tmp_path / "ckpt-00000004" / "params.npz"
    data = bytearray(params.read_bytes())
    data[-40] ^= 1
    params.write_bytes(bytes(data))
    other = make_net(1)
    before = snapshot(other)
    with pytest.raises(FormatError, match="params.npz does not match its checksum"):
        load_checkpoint(tmp_path, other)
    for name, value in snapshot(other).items():
        np.testing.assert_array_equal(value, before[name])
    manifest = tmp_path / "ckpt-00000004" / "checkpoint.json"
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
    with pytest.raises(ValueError, match="finite numbers"):
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
