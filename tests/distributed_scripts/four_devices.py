"""Checks on 4 simulated CPU devices; run by tests/test_distributed.py in a fresh process.

XLA_FLAGS must give 4 host devices before jax is imported. Prints one JSON object:
check name -> "ok" or the failure's text.
"""
import json
import os
import sys
import traceback

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import hybrid  # noqa: E402
from hybrid._core import functional as _functional  # noqa: E402
from hybrid import autograd, distributed, nn, utils  # noqa: E402
from workload import (BATCH, FEATURES, batches, build_net, make_trainer, numpy_batch_norm, params_of,  # noqa: E402
                      train)

RTOL, ATOL = 1e-5, 1e-6
DATA = batches()


def assert_same_params(got, want, rtol=RTOL, atol=ATOL):
    assert got.keys() == want.keys()
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=atol, err_msg=name)


def single_device_reference():
    net = build_net()
    return train(net, make_trainer(net), DATA)[0]


def partitioned_text(step_fn, x, y):
    """The HLO of a hybrid.compile step's one program after XLA's SPMD partitioning."""
    (program,) = step_fn._programs.values()
    donated, kept, host = program.state_inputs()
    args = (donated, kept, [x, y], host)
    return program.jitted.lower(*args).compile().as_text()


def check_replicated(reference):
    net = build_net()
    trainer = make_trainer(net, devices=4)
    got, step = train(net, trainer, DATA, place=lambda x, y: distributed.shard_batch((x, y), trainer.mesh))
    assert_same_params(got, reference)
    weight = net[0].weight
    assert weight.data().sharding.spec == P() and len(weight.data().sharding.device_set) == 4
    assert trainer._states[weight][0].sharding == weight.data().sharding
    text = partitioned_text(step, *distributed.shard_batch(DATA[0], trainer.mesh))
    assert "all-reduce" in text, "no all-reduce in the partitioned program"
    assert f"f32[{BATCH // 4},{FEATURES}]" in text, "the program does not work on quarter batches"


def check_sharded(reference):
    mesh = distributed.make_mesh(4, shape=(2, 2))
    rules = distributed.ShardingRules([(r"^\d+\.weight$", P("model", None))])
    net = build_net()
    trainer = make_trainer(net, mesh=mesh, sharding_rules=rules)
    got, _ = train(net, trainer, DATA, place=lambda x, y: distributed.shard_batch((x, y), mesh))
    assert_same_params(got, reference)
    weight = net[0].weight.data()
    assert weight.sharding.spec == P("model", None), weight.sharding
    assert {s.data.shape for s in weight.addressable_shards} == {(8, FEATURES)}
    assert trainer._states[net[0].weight][0].sharding.spec == P("model", None)
    assert net[1].gamma.data().sharding.spec == P()


def check_gluon_loop():
    """split_and_load(x, trainer.mesh) in a Gluon loop with SyncBatchNorm equals one device with BatchNorm."""
    single = build_net(dropout=0.0)
    data = DATA[:2]
    want, _ = train(single, make_trainer(single), data, compiled=False)
    net = build_net(norm=nn.SyncBatchNorm, dropout=0.0)
    trainer = make_trainer(net, devices=jax.devices())
    loss_fn = hybrid.loss.SoftmaxCrossEntropyLoss()
    hybrid.random.seed(7)  # as train() does: parameters are initialised at the first forward
    for x, y in data:
        xs, ys = utils.split_and_load(x, trainer.mesh), utils.split_and_load(y, trainer.mesh)
        assert len(xs) == 1 and len(xs[0].sharding.device_set) == 4
        with autograd.record():
            losses = [loss_fn(net(a), b) for a, b in zip(xs, ys)]
        autograd.backward(losses)
        trainer.step(x.shape[0])
    assert_same_params(params_of(net), want)


def check_remat():
    """A deeper net rematerialised (remat='sqrt'), data parallel on 4 devices, in the compiled step and
    in the Gluon loop == the same net without remat."""
    def deep(remat):
        hybrid.random.seed(0)
        net = nn.HybridSequential()
        for _ in range(6):
            net.add(nn.Dense(16, activation="relu"), nn.BatchNorm(), nn.Dropout(0.25))
        net.add(nn.Dense(4))
        net.initialize(hybrid.init.Xavier())
        net.hybridize(remat=remat)
        return net

    def run(remat, compiled):
        net = deep(remat)
        trainer = make_trainer(net, devices=4)
        got, _ = train(net, trainer, DATA, compiled=compiled,
                       place=lambda x, y: distributed.shard_batch((x, y), trainer.mesh))
        return got, net

    for compiled in (True, False):
        want, _ = run(None, compiled)
        got, net = run("sqrt", compiled)
        assert_same_params(got, want, rtol=1e-4, atol=1e-5)  # six BatchNorms of 2 samples per device
        entry = next(iter(net._cached_op.entries.values()))
        assert any(n.kind == "remat_segment" for n in entry.train_graph.nodes)


def check_sync_batchnorm_in_shard_map():
    """Per-device code: each device sees 2 of 8 samples; statistics and gradients are those of all 8."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((8, 3, 2)) * 2 + 1).astype(np.float32)
    head = rng.standard_normal(x.shape).astype(np.float32)
    gamma, beta = rng.uniform(0.5, 1.5, 3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    bn = nn.SyncBatchNorm(momentum=0.5, num_devices=4, in_channels=3)
    bn.initialize()
    bn.gamma.set_data(gamma)
    bn.beta.set_data(beta)

    def local(xc):
        with _functional.frame({}) as frame:
            y = bn(xc)
        return y, frame.updates[bn.running_mean], frame.updates[bn.running_var]

    sharded = jax.shard_map(local, mesh=distributed.make_mesh(4), in_specs=P("data"), out_specs=(P("data"), P(), P()))
    with autograd.train_mode():
        y, mean_run, var_run = jax.jit(sharded)(x)
        grad = jax.jit(jax.grad(lambda v: jnp.sum(sharded(v)[0] * head)))(x)
    want_y, want_grad, mean, var = numpy_batch_norm(x, gamma, beta, head)
    np.testing.assert_allclose(np.asarray(y), want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(grad), want_grad, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(mean_run), 0.5 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(var_run), 0.5 + 0.5 * var, rtol=1e-5, atol=1e-6)


def expect_error(fn, kind, *fragments):
    try:
        fn()
    except kind as exc:
        for fragment in fragments:
            assert fragment in str(exc), f"{fragment!r} not in {exc}"
        return
    raise AssertionError(f"{fn} raised nothing")


def check_errors():
    mesh = distributed.make_mesh(4)
    x = np.zeros((6, FEATURES), np.float32)
    expect_error(lambda: distributed.shard_batch(x, mesh), ValueError, "batch of 6 samples", "4 devices",
                 "multiple of 4")
    expect_error(lambda: utils.split_and_load(x, mesh), ValueError, "batch of 6 samples")
    expect_error(lambda: make_trainer(build_net(), devices=8), ValueError, "asked for 8 devices", "only 4")
    expect_error(lambda: distributed.make_mesh(4, shape=(3, 2)), ValueError, "needs 6 devices, got 4")
    odd = nn.HybridSequential()
    odd.add(nn.Dense(3, in_units=FEATURES))
    odd.initialize()
    grid = distributed.make_mesh(4, shape=(2, 2))
    expect_error(lambda: make_trainer(odd, mesh=grid, sharding_rules=[("weight", P("model", None))]),
                 ValueError, "'0.weight'", "size 3", "split evenly", "('model',)")
    expect_error(lambda: make_trainer(odd, mesh=mesh, sharding_rules=[("weight", P("model", None))]),
                 ValueError, "'0.weight'", "names mesh axis 'model'", "('data',)")


def main():
    checks = {"errors": check_errors, "sync_batchnorm_shard_map": check_sync_batchnorm_in_shard_map,
              "gluon_loop": check_gluon_loop, "remat": check_remat}
    results = {}
    try:
        reference = single_device_reference()
        checks["replicated"] = lambda: check_replicated(reference)
        checks["sharded"] = lambda: check_sharded(reference)
    except Exception:
        results["reference"] = traceback.format_exc()
    for name, check in checks.items():
        try:
            check()
            results[name] = "ok"
        except Exception:
            results[name] = traceback.format_exc()
    print(json.dumps(results))


if __name__ == "__main__":
    assert len(jax.devices()) == 4, jax.devices()
    sys.exit(main())
