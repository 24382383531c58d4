"""Training checkpoints with backend='orbax': round trip, bit-identical resume, asynchronous saves,
verification, sharded arrays on 4 simulated devices and two processes saving together.

The multi-device checks run in fresh processes (tests/distributed_scripts/orbax_*.py), started before the
first test so that they run while the single-process tests do.
"""
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import hybrid
from hybrid import Trainer, autograd, nn
from hybrid.export import FormatError, list_checkpoints, load_checkpoint, save_checkpoint
from hybrid.export import orbax_checkpoint

from helpers import batch, make_net, snapshot

SCRIPTS = Path(__file__).parent / "distributed_scripts"
ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(SCRIPTS))
from workload import build_net, params_of  # noqa: E402


def script_env(**extra):
    env = dict(os.environ, JAX_PLATFORMS="cpu", **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("XLA_FLAGS", None)
    return env


def start(args, log, **env):
    """Start a script; its output goes to the file ``log`` (a pipe nobody reads could fill and block it)."""
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, *map(str, args)], env=script_env(**env), cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module", autouse=True)
def subprocess_runs(tmp_path_factory):
    """Starts the 4-device script and the two processes before the first test; returns a function that
    waits for one group of them ('four', 'two') and gives ``(return codes, outputs, working directory)``."""
    four, two = tmp_path_factory.mktemp("four"), tmp_path_factory.mktemp("two")
    port = free_port()
    runs = {"four": ([start([SCRIPTS / "orbax_four_devices.py", four], four / "log")], four),
            "two": ([start([SCRIPTS / "orbax_two_processes.py", two / "ckpt", two / "params.npz"], two / f"log{rank}",
                           HYBRID_COORDINATOR=f"127.0.0.1:{port}", HYBRID_NUM_PROCESSES="2",
                           HYBRID_PROCESS_ID=str(rank)) for rank in range(2)], two)}
    done = {}

    def wait(name):
        if name not in done:
            procs, workdir = runs[name]
            try:
                for proc in procs:
                    proc.wait(timeout=240)
            finally:
                for proc in procs:
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
            logs = sorted(workdir.glob("log*"))
            done[name] = ([proc.returncode for proc in procs], [log.read_text() for log in logs], workdir)
        return done[name]

    yield wait
    for name in runs:
        wait(name)


LOSS = hybrid.loss.SoftmaxCELoss()  # one loss block: a network's step compiles once for all calls


def train(net, trainer, steps):
    """test_checkpoint.train with a shared loss block; returns the losses."""
    losses = []
    for step in steps:
        x, y = batch(step)
        with autograd.record():
            loss = LOSS(net(x), y)
        autograd.backward(loss)
        trainer.step(6)
        losses.append(np.asarray(loss))
    return losses


@pytest.fixture(scope="module")
def trained():
    """A network and Adam trainer after 2 steps (tests that train it further restore it afterwards)."""
    net = make_net(0)
    trainer = Trainer(net.collect_params(), "adam", {"learning_rate": 0.01})
    train(net, trainer, range(2))
    return net, trainer


def test_round_trip_manifest_and_backend_detection(tmp_path, trained):
    net, trainer = trained
    path = save_checkpoint(tmp_path, net, trainer, step=2, epoch=1, extra={"pos": 2}, backend="orbax")
    manifest = json.loads((Path(path) / "checkpoint.json").read_text())
    assert manifest["backend"] == "orbax" and manifest["step"] == 2 and manifest["epoch"] == 1
    assert manifest["random_state"] == list(hybrid.random.get_state())
    assert [(e["name"], e["shape"], e["dtype"]) for e in manifest["params"]] == \
        [(name, list(p.shape), "float32") for name, p in net.collect_params().items()]
    assert manifest["trainer"]["optimizer"] == "Adam" and manifest["trainer"]["num_update"] == 2
    on_disk = sorted(str(f.relative_to(path)) for f in Path(path, "state").rglob("*") if f.is_file())
    assert sorted(manifest["files"]) == on_disk and on_disk
    fresh = make_net(1)
    fresh_trainer = Trainer(fresh.collect_params(), "adam", {"learning_rate": 0.5})
    meta = load_checkpoint(tmp_path, fresh, fresh_trainer)
    assert (meta["step"], meta["epoch"], meta["extra"], meta["backend"]) == (2, 1, {"pos": 2}, "orbax")
    for name, value in snapshot(fresh).items():
        np.testing.assert_array_equal(value, snapshot(net)[name])
    assert fresh_trainer.learning_rate == 0.01 and fresh_trainer.optimizer.num_update == 2
    fresh_params = dict(zip(net.collect_params().values(), fresh.collect_params().values()))
    assert len(trainer._states) == 6 and {fresh_params[p] for p in trainer._states} == set(fresh_trainer._states)
    for param, state in trainer._states.items():
        assert len(state) == 3  # Adam: mean, variance, step count
        for got, want in zip(fresh_trainer._states[fresh_params[param]], state):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))

    # both backends in one directory: retention, overwrite and listing see them alike
    npz = save_checkpoint(tmp_path, net, trainer, step=3, backend="npz")
    assert load_checkpoint(tmp_path, fresh)["backend"] == "npz"
    with pytest.raises(ValueError, match=r"written by backend 'npz', not 'orbax'"):
        load_checkpoint(tmp_path, fresh, backend="orbax")
    again = save_checkpoint(tmp_path, net, step=2, backend="orbax", overwrite=True, keep=2)
    assert list_checkpoints(tmp_path) == [(2, again), (3, npz)] and not os.path.exists(path)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save_checkpoint(tmp_path, net, step=2, backend="orbax")
    save_checkpoint(tmp_path, net, step=4, backend="orbax", keep=1)
    assert [step for step, _ in list_checkpoints(tmp_path)] == [4]
    assert load_checkpoint(tmp_path, fresh, backend="orbax")["step"] == 4
    with pytest.raises(ValueError, match="saved without trainer states"):
        load_checkpoint(tmp_path, fresh, fresh_trainer)
    with pytest.raises(ValueError, match="backend must be one of"):
        save_checkpoint(tmp_path, net, step=5, backend="pickle")
    with pytest.raises(ValueError, match="cannot save asynchronously"):
        save_checkpoint(tmp_path, net, step=5, asynchronous=True)
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]  # no temporaries left


def compiled_step(net, trainer):
    """A hybrid.compile training step on ``batch(i)``; returns the loss."""
    @hybrid.compile
    def step(x, y):
        with autograd.record():
            loss = LOSS(net(x), y)
        autograd.backward(loss)
        trainer.step(6)
        return loss
    return lambda i: np.asarray(step(*batch(i)))


def test_resume_continues_training_bit_identically(tmp_path):
    net = make_net(0)
    trainer = Trainer(net.collect_params(), "adam", {"learning_rate": 0.01})
    step = compiled_step(net, trainer)
    for i in range(3):
        step(i)
    save_checkpoint(tmp_path / "orbax", net, trainer, step=3, epoch=1, extra={"data_position": 3}, backend="orbax")
    save_checkpoint(tmp_path / "npz", net, trainer, step=3)
    straight = [step(i) for i in range(3, 5)]
    expected = snapshot(net)

    # a fresh network and trainer, another random state: everything comes back from the checkpoint
    fresh = make_net(7)
    fresh_trainer = Trainer(fresh.collect_params(), "adam", {"learning_rate": 0.5})
    hybrid.random.seed(99)
    meta = load_checkpoint(tmp_path / "orbax", fresh, fresh_trainer)
    assert (meta["step"], meta["epoch"], meta["extra"]) == (3, 1, {"data_position": 3})
    fresh_step = compiled_step(fresh, fresh_trainer)
    resumed = [fresh_step(i) for i in range(meta["extra"]["data_position"], 5)]
    for a, b in zip(straight, resumed):
        np.testing.assert_array_equal(a, b)  # dropout masks, Adam states and BatchNorm statistics all resume
    for name, value in snapshot(fresh).items():
        np.testing.assert_array_equal(value, expected[name])

    # back into the running step compiled before the load (it writes the optimizer states back into the
    # Trainer's own dict), from either backend
    for backend in ("npz", "orbax"):
        load_checkpoint(tmp_path / backend, net, trainer)
        for a, b in zip(straight, [step(i) for i in range(3, 5)]):
            np.testing.assert_array_equal(a, b)
        for name, value in snapshot(net).items():
            np.testing.assert_array_equal(value, expected[name])


def test_asynchronous_save_is_published_only_when_complete(tmp_path, monkeypatch, trained):
    net, trainer = trained
    first = save_checkpoint(tmp_path, net, trainer, step=2, backend="orbax")
    saved = snapshot(net)
    release = threading.Event()
    hashing = orbax_checkpoint._file_entries

    def held(tmp):  # the files are written; the manifest is not yet
        assert release.wait(30)
        return hashing(tmp)

    monkeypatch.setattr(orbax_checkpoint, "_file_entries", held)
    pending = save_checkpoint(tmp_path, net, trainer, step=3, backend="orbax", asynchronous=True)
    train(net, trainer, range(2, 4))  # training goes on: the checkpoint keeps the values of the call
    assert not np.array_equal(snapshot(net)["0.weight"], saved["0.weight"])
    assert not pending.done()
    assert list_checkpoints(tmp_path) == [(2, first)]  # still being written: not visible
    (tmp,) = [name for name in os.listdir(tmp_path) if name.startswith(".tmp-ckpt-00000003")]
    assert os.listdir(tmp_path / tmp) == ["state"]
    release.set()
    path = pending.wait_until_finished()
    assert pending.done() and list_checkpoints(tmp_path) == [(2, first), (3, path)]
    fresh = make_net(3)
    assert load_checkpoint(tmp_path, fresh)["step"] == 3
    for name, value in snapshot(fresh).items():
        np.testing.assert_array_equal(value, saved[name])
    monkeypatch.undo()

    # a load in this process waits for this process's pending save of the directory
    later = save_checkpoint(tmp_path, net, step=9, backend="orbax", asynchronous=True)
    assert load_checkpoint(tmp_path, fresh)["step"] == 9 and later.done()

    # a failed write raises from wait_until_finished and leaves nothing behind
    monkeypatch.setattr(orbax_checkpoint, "_file_entries", lambda tmp: (_ for _ in ()).throw(OSError(28, "full")))
    failed = save_checkpoint(tmp_path, net, step=10, backend="orbax", asynchronous=True)
    with pytest.raises(OSError, match="full"):
        failed.wait_until_finished()
    assert [step for step, _ in list_checkpoints(tmp_path)] == [2, 3, 9]
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]
    load_checkpoint(tmp_path, net, trainer, step=2)  # the shared network as it was
    for name, value in snapshot(net).items():
        np.testing.assert_array_equal(value, saved[name])


def test_a_refused_load_changes_nothing(tmp_path, trained):
    net, trainer = trained
    save_checkpoint(tmp_path, net, trainer, step=1, backend="orbax")

    wider = nn.HybridSequential()  # same names, one shape differs
    wider.add(nn.Dense(9, activation="relu"), nn.BatchNorm(), nn.Dropout(0.4), nn.Dense(3))
    wider.initialize()
    wider(np.zeros((2, 4), np.float32))
    other = nn.HybridSequential()  # fewer parameters
    other.add(nn.Dense(5, in_units=4))
    other.initialize()
    same = make_net(4)
    hybrid.random.seed(123)
    random_before = hybrid.random.get_state()
    cases = [(wider, None, r"parameter '0.weight' has shape \(8, 4\) in .*expects \(9, 4\)"),
             (other, None, r"holds parameter\(s\) \['1.beta', .*'3.weight'\] that HybridSequential does not have"),
             (same, Trainer(same.collect_params(), "sgd", {"learning_rate": 0.5}), "optimizer Adam, this Trainer "
              "uses SGD"),
             (same, Trainer(list(same.collect_params().values())[:2], "adam", {"learning_rate": 0.5}),
              "are for other parameters")]
    for target, target_trainer, message in cases:
        before = snapshot(target)
        with pytest.raises(ValueError, match=message):
            load_checkpoint(tmp_path, target, target_trainer)
        for name, value in snapshot(target).items():
            np.testing.assert_array_equal(value, before[name])
        if target_trainer is not None:
            assert target_trainer.learning_rate == 0.5 and target_trainer._states == {}
            assert target_trainer.optimizer.num_update == 0
        assert hybrid.random.get_state() == random_before

    half = make_net(4)
    half.cast("float16")
    with pytest.raises(ValueError, match=r"parameter '0.weight' has dtype float32 in .*expects float16"):
        load_checkpoint(tmp_path, half)


def test_corrupted_or_missing_files_are_detected_before_anything_changes(tmp_path, trained):
    net, _ = trained
    path = Path(save_checkpoint(tmp_path, net, step=4, backend="orbax"))
    other = make_net(1)
    before = snapshot(other)
    chunk = max((f for f in path.joinpath("state").rglob("*") if f.is_file()), key=lambda f: f.stat().st_size)
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 1
    chunk.write_bytes(bytes(data))
    name = str(chunk.relative_to(path))
    with pytest.raises(FormatError, match=rf"checkpoint '{path}': {name} does not match its checksum"):
        load_checkpoint(tmp_path, other)
    data[len(data) // 2] ^= 1
    chunk.write_bytes(bytes(data))
    assert load_checkpoint(tmp_path, other)["step"] == 4  # restored: loads again
    other = make_net(1)

    (path / "state" / "stray").write_bytes(b"x")
    with pytest.raises(FormatError, match=r"files \['state/stray'\] are not in the manifest"):
        load_checkpoint(tmp_path, other)
    (path / "state" / "stray").unlink()
    chunk.unlink()
    with pytest.raises(FileNotFoundError, match=rf"checkpoint '{path}': {name} is missing"):
        load_checkpoint(tmp_path, other)
    manifest = path / "checkpoint.json"
    manifest.write_text(manifest.read_text().replace('"step": 4', '"step": 5'))
    with pytest.raises(FormatError, match="checksum mismatch"):
        load_checkpoint(tmp_path, other)
    for name, value in snapshot(other).items():
        np.testing.assert_array_equal(value, before[name])
    with pytest.raises(FileNotFoundError, match="no checkpoints"):
        load_checkpoint(tmp_path / "empty", other, backend="orbax")


@pytest.mark.parametrize("check", ["sharded_resume", "other_layouts", "async_on_mesh"])
def test_sharded_checkpoints_on_four_devices(subprocess_runs, check):
    """sharded_resume: a 2x2 mesh with Dense weights split over 'model' is saved per shard (orbax records the
    sharding), restored into a fresh net and Trainer with the same shardings (states too), and training goes
    on bit-identically; other_layouts: that checkpoint restored into a replicated 4-device Trainer and into a
    one-device net holds the same values; async_on_mesh: an asynchronous save of sharded arrays keeps the
    values of its call while training goes on."""
    (code,), (output,), _ = subprocess_runs("four")
    assert code == 0, output[-4000:]
    results = json.loads([line for line in output.splitlines() if line.startswith("{")][-1])
    assert results[check] == "ok", results[check]


def test_two_processes_save_and_restore_together(subprocess_runs):
    """Two processes (one CPU device each, loopback) with the first weight split between them: saved by both,
    restored bit-identically (checked in the script); the asynchronous save each left pending at exit is
    complete, and this one-device process restores it to the parameters the processes had."""
    codes, outputs, workdir = subprocess_runs("two")
    assert codes == [0, 0], "\n".join(out[-3000:] for out in outputs)
    assert [step for step, _ in list_checkpoints(workdir / "ckpt")] == [2, 3]
    assert not [name for name in os.listdir(workdir / "ckpt") if name.startswith(".")]
    net = build_net()  # shapes not known yet: they come from the checkpoint
    assert load_checkpoint(workdir / "ckpt", net)["step"] == 3
    want = np.load(workdir / "params.npz")
    got = params_of(net)
    assert sorted(got) == sorted(want.files)
    for name in want.files:
        np.testing.assert_array_equal(got[name], want[name])
