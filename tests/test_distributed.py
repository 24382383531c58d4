"""Multi-device and multi-process training: equal to one device, sharding rules, SyncBatchNorm, errors.

Checks that need 4 devices run in one subprocess with simulated CPU devices
(tests/distributed_scripts/four_devices.py); the two-process test starts two JAX
processes joined over loopback. The rest runs here, on the main process's one device.
"""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, PartitionSpec as P

from hybrid._core import functional as _functional
from hybrid import autograd, distributed, nn, utils

from conftest import assert_close

SCRIPTS = Path(__file__).parent / "distributed_scripts"
ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(SCRIPTS))
from workload import batches, build_net, make_trainer, numpy_batch_norm, train  # noqa: E402


def script_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["JAX_PLATFORMS"] = "cpu"
    env.pop("XLA_FLAGS", None)
    return env


# -- four simulated devices ---------------------------------------------------------------
@pytest.fixture(scope="module")
def four_devices():
    """Runs every 4-device check once; returns check name -> 'ok' or the failure's traceback."""
    proc = subprocess.run([sys.executable, str(SCRIPTS / "four_devices.py")], capture_output=True, text=True,
                          timeout=300, env=script_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("check", ["replicated", "sharded", "gluon_loop", "sync_batchnorm_shard_map", "errors",
                                   "remat"])
def test_on_four_devices(four_devices, check):
    """replicated: 4-device data parallel == 1 device (and the program all-reduces);
    sharded: 2x2 mesh with Dense weights split over 'model' == 1 device;
    gluon_loop: split_and_load(x, trainer.mesh) + SyncBatchNorm == 1 device with BatchNorm;
    sync_batchnorm_shard_map: SyncBatchNorm in per-device code == NumPy batch norm of the whole batch;
    remat: a rematerialised net on 4 devices (compiled step and Gluon loop) == the same without remat;
    errors: indivisible batch / parameter, too many devices, wrong mesh shape or axis."""
    assert "reference" not in four_devices, four_devices["reference"]
    assert four_devices[check] == "ok", four_devices[check]


# -- two processes ------------------------------------------------------------------------
def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_processes_train_to_the_same_parameters_as_one(tmp_path):
    out = tmp_path / "params.npz"
    port = free_port()
    procs = []
    for rank in range(2):
        env = script_env()
        env.update(HYBRID_COORDINATOR=f"127.0.0.1:{port}", HYBRID_NUM_PROCESSES="2", HYBRID_PROCESS_ID=str(rank))
        procs.append(subprocess.Popen([sys.executable, str(SCRIPTS / "two_processes.py"), str(out)], env=env,
                                      cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = []
    try:
        for proc in procs:
            logs.append(proc.communicate(timeout=240)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert all(proc.returncode == 0 for proc in procs), "\n".join(log[-3000:] for log in logs)
    net = build_net()
    want, _ = train(net, make_trainer(net), batches())
    got = np.load(out)
    assert sorted(got.files) == sorted(want)
    for name in want:
        assert_close(got[name], want[name], rtol=1e-5, atol=1e-6)


# -- one device ---------------------------------------------------------------------------
def test_make_mesh_defaults_and_errors():
    mesh = distributed.make_mesh()
    assert mesh.axis_names == ("data",) and mesh.devices.size == len(jax.devices())
    assert distributed.make_mesh(1, shape=(1, 1)).axis_names == ("data", "model")
    assert distributed.make_mesh(mesh) is mesh
    assert distributed.make_mesh(jax.devices()[0]).shape == {"data": 1}
    with pytest.raises(ValueError, match=r"asked for 5 devices, but only 1 .*xla_force_host_platform_device_count=5"):
        distributed.make_mesh(5)
    with pytest.raises(ValueError, match=r"needs 2 devices, got 1"):
        distributed.make_mesh(1, shape=(2,))
    with pytest.raises(ValueError, match="give axis_names for a 3-D mesh"):
        distributed.make_mesh(1, shape=(1, 1, 1))
    with pytest.raises(ValueError, match="distinct non-empty strings"):
        distributed.make_mesh(1, shape=(1, 1), axis_names=("x", "x"))
    with pytest.raises(ValueError, match="names a device twice"):
        distributed.make_mesh(jax.devices() * 2)
    with pytest.raises(TypeError, match="devices must be None"):
        distributed.make_mesh("gpu")


def test_sharding_rules_first_match_wins_and_specs_are_checked():
    rules = distributed.ShardingRules([(r"embed\.weight$", P("model", None)), (r"weight$", ("model",)),
                                       (r"bias$", None)])
    assert rules.spec_for("embed.weight") == P("model", None)
    assert rules.spec_for("0.weight") == P("model")
    assert rules.spec_for("0.bias") == P() and rules.spec_for("1.gamma") == P()
    mesh = distributed.make_mesh(1, shape=(1, 1))
    sharding = distributed.parameter_sharding("0.weight", (4, 3), mesh, P("model", None))
    assert sharding.spec == P("model", None) and sharding.mesh is mesh
    with pytest.raises(ValueError, match=r"'0.bias': spec .* has 2 entries, but the parameter has shape \(4,\)"):
        distributed.parameter_sharding("0.bias", (4,), mesh, P("model", None))
    with pytest.raises(ValueError, match=r"'0.weight'.*mesh axis 'tensor', but the mesh has axes \('data', 'model'\)"):
        distributed.parameter_sharding("0.weight", (4, 3), mesh, P("tensor"))
    with pytest.raises(ValueError, match="uses a mesh axis twice"):
        distributed.parameter_sharding("0.weight", (4, 3), mesh, P("model", "model"))
    with pytest.raises(TypeError, match=r"\(regex string, PartitionSpec\) pair"):
        distributed.ShardingRules(["weight"])
    with pytest.raises(TypeError, match="mesh axis names"):
        distributed.ShardingRules([("weight", (3,))])


def test_shard_batch_splits_pytrees_and_explains_bad_meshes(rng):
    mesh = distributed.make_mesh()
    x, y = rng.standard_normal((4, 3)).astype(np.float32), np.arange(4)
    sx, sy = distributed.shard_batch((x, y), mesh)
    assert sx.sharding.spec == P("data") and isinstance(sy, jax.Array)
    np.testing.assert_array_equal(np.asarray(sx), x)
    cols = distributed.shard_batch(x, mesh, batch_axis=1)
    assert cols.sharding.spec == P(None, "data")
    other = Mesh(np.array(jax.devices()), ("batch",))
    with pytest.raises(ValueError, match=r"mesh has axes \('batch',\), none named 'data'"):
        distributed.shard_batch(x, other)
    assert distributed.shard_batch(x, other, axis_name="batch").sharding.spec == P("batch")
    with pytest.raises(TypeError, match="expected a jax.sharding.Mesh"):
        distributed.shard_batch(x, jax.devices())
    with pytest.raises(ValueError, match="cannot split a scalar"):
        distributed.shard_batch(np.float32(1.0), mesh)
    (whole,) = utils.split_and_load(x, mesh)
    assert whole.sharding.spec == P("data") and whole.shape == x.shape


def test_trainer_on_a_one_device_mesh_matches_plain_trainer():
    data = batches(steps=1)
    plain = build_net()
    want, _ = train(plain, make_trainer(plain), data)
    net = build_net()
    trainer = make_trainer(net, devices=1)
    got, _ = train(net, trainer, data, place=lambda x, y: distributed.shard_batch((x, y), trainer.mesh))
    for name in want:
        assert_close(got[name], want[name], rtol=1e-6, atol=1e-7)
    assert trainer.mesh.shape == {"data": 1} and make_trainer(plain).mesh is None
    assert net[0].weight.data().sharding.mesh is trainer.mesh  # placed at the first step (deferred shapes)
    with pytest.raises(ValueError, match="give devices or mesh, not both"):
        make_trainer(net, devices=1, mesh=trainer.mesh)
    with pytest.raises(ValueError, match=r"'0.weight'.*mesh axis 'model'"):
        make_trainer(net, devices=1, sharding_rules=[("weight", P("model"))])


def test_place_parameters_for_inference_without_a_trainer(rng):
    net = nn.HybridSequential()
    net.add(nn.Dense(4, in_units=3), nn.Dense(2))
    net.initialize()
    mesh = distributed.make_mesh(1, shape=(1, 1))
    placement = distributed.place_parameters(net.collect_params(), mesh, [(r"^0\.", P("model"))])
    assert placement.shardings[net[0].weight].spec == P("model")
    assert placement.shardings[net[0].bias].spec == P("model")
    assert net[0].weight.data().sharding.spec == P("model")
    assert net[1].weight not in placement.shardings  # deferred: placed by place_pending once created
    x = rng.standard_normal((2, 3)).astype(np.float32)
    net(distributed.shard_batch(x, mesh))
    placement.place_pending()
    assert net[1].weight.data().sharding == placement.shardings[net[1].weight]
    w0, b0, w1, b1 = (np.asarray(p.data()) for p in net.collect_params().values())
    assert_close(net(distributed.shard_batch(x, mesh)), (x @ w0.T + b0) @ w1.T + b1)
    with pytest.raises(TypeError, match="expected a jax.sharding.Mesh"):
        distributed.place_parameters(net.collect_params(), jax.devices())


def per_device_batch_norm(bn, chunks):
    """Run ``bn`` in training mode on each chunk under vmap with the named axis 'data'."""
    def local(xc):
        with _functional.frame({}) as frame:
            y = bn(xc)
        return y, frame.updates[bn.running_mean], frame.updates[bn.running_var]
    with autograd.train_mode():
        return jax.jit(jax.vmap(local, axis_name="data"))(chunks)


def test_sync_batchnorm_reduces_over_the_named_axis(rng):
    x = (rng.standard_normal((8, 3, 2)) * 2 + 1).astype(np.float32)
    head = rng.standard_normal(x.shape).astype(np.float32)
    gamma, beta = rng.uniform(0.5, 1.5, 3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    bn = nn.SyncBatchNorm(in_channels=3, momentum=0.5)
    bn.initialize()
    bn.gamma.set_data(gamma)
    bn.beta.set_data(beta)
    chunks = x.reshape(4, 2, 3, 2)
    y, mean_run, var_run = per_device_batch_norm(bn, chunks)
    want_y, want_grad, mean, var = numpy_batch_norm(x, gamma, beta, head)
    assert_close(np.asarray(y).reshape(x.shape), want_y)
    assert_close(mean_run[0], 0.5 * mean)
    assert_close(var_run[0], 0.5 + 0.5 * var)
    grad = jax.grad(lambda c: jnp.sum(per_device_batch_norm(bn, c)[0] * head.reshape(chunks.shape)))(chunks)
    assert_close(np.asarray(grad).reshape(x.shape), want_grad, rtol=1e-4, atol=1e-5)
    plain = nn.BatchNorm(in_channels=3, momentum=0.5)
    plain.initialize()
    local_y = per_device_batch_norm(plain, chunks)[0]
    assert not np.allclose(np.asarray(local_y), np.asarray(y), atol=1e-3)  # per-chunk statistics differ


def test_sync_batchnorm_outside_per_device_code_is_batchnorm(rng):
    x = rng.standard_normal((6, 4)).astype(np.float32)
    sync, plain = nn.SyncBatchNorm(), nn.BatchNorm()
    for block in (sync, plain):
        block.initialize()
    with autograd.record():
        got, want = sync(x), plain(x)
    assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert_close(sync.running_var.data(), plain.running_var.data(), rtol=1e-6, atol=1e-7)
    assert "SyncBatchNorm(axis_name='data'" in repr(sync)
    checked = nn.SyncBatchNorm(num_devices=2)
    checked.initialize()
    with pytest.raises(ValueError, match="num_devices=2, but axis 'data' has 4 devices"):
        per_device_batch_norm(checked, x.reshape(4, 1, 6))
    with pytest.raises(ValueError, match="num_devices must be a positive integer"):
        nn.SyncBatchNorm(num_devices=0)
    assert not distributed.axis_is_bound("data")
