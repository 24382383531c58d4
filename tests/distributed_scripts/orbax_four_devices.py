"""Orbax checkpoints of parameters and optimizer states sharded over 4 simulated CPU devices; run by
tests/test_checkpoint_orbax.py in a fresh process (XLA_FLAGS must be set before jax is imported).

Argument: an empty directory for the checkpoints. Prints one JSON object: check name -> "ok" or the
failure's text.
"""
import json
import os
import sys
import traceback

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import numpy as np  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
from etils import epath  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import hybrid  # noqa: E402
from hybrid import distributed  # noqa: E402
from hybrid.export import load_checkpoint, save_checkpoint  # noqa: E402
from orbax_steps import stepper  # noqa: E402
from workload import FEATURES, batches, build_net, make_trainer, params_of  # noqa: E402

DATA = batches(steps=5)
RULES = [(r"^\d+\.weight$", P("model", None))]
SAVED = {}  # the parameters at the sharded checkpoint of step 3
RESUMED = []  # mesh, net, trainer and step function of the resumed run


def check_sharded_resume(directory):
    """2x2 mesh, Dense weights split over 'model': saved shard by shard, restored into a fresh net and
    Trainer with the same shardings, and training continues bit-identically."""
    mesh = distributed.make_mesh(4, shape=(2, 2))
    net = build_net()
    trainer = make_trainer(net, mesh=mesh, sharding_rules=RULES)
    run = stepper(net, trainer, mesh)
    hybrid.random.seed(7)
    for x, y in DATA[:3]:
        run(x, y)
    path = save_checkpoint(directory, net, trainer, step=3, backend="orbax")
    SAVED.update(params_of(net))
    for x, y in DATA[3:]:
        run(x, y)
    straight = params_of(net)

    tree = ocp.PyTreeCheckpointHandler().metadata(epath.Path(path) / "state").tree
    manifest = json.load(open(os.path.join(path, "checkpoint.json")))
    index = [entry["name"] for entry in manifest["params"]].index("0.weight")
    stored = tree["params"][index]  # orbax's record: a sharded array, written in pieces within each shard
    assert tuple(stored.sharding.partition_spec) == ("model", None), stored
    assert 8 % stored.storage.write_shape[0] == 0 and stored.storage.write_shape[1] == FEATURES, stored

    fresh = build_net()  # deferred shapes: placed from the rules when restored
    fresh_trainer = make_trainer(fresh, mesh=mesh, sharding_rules=RULES)
    hybrid.random.seed(99)
    meta = load_checkpoint(directory, fresh, fresh_trainer)
    assert meta["step"] == 3 and meta["backend"] == "orbax"
    weight = fresh[0].weight.data()
    assert weight.sharding.spec == P("model", None), weight.sharding
    assert {s.data.shape for s in weight.addressable_shards} == {(8, FEATURES)}
    momentum = fresh_trainer._states[fresh[0].weight][0]
    assert momentum.sharding.spec == P("model", None), momentum.sharding
    assert fresh[1].gamma.data().sharding.spec == P()
    run = stepper(fresh, fresh_trainer, mesh)
    for x, y in DATA[3:]:
        run(x, y)
    resumed = params_of(fresh)
    for name, value in straight.items():
        assert np.array_equal(resumed[name], value), name
    RESUMED.extend([mesh, fresh, fresh_trainer, run])


def check_restore_onto_other_layouts(directory):
    """The 2x2-sharded checkpoint goes into a replicated 4-device Trainer and into a plain one-device net."""
    assert SAVED, "no sharded checkpoint was saved"
    net = build_net()
    trainer = make_trainer(net, devices=4)
    load_checkpoint(directory, net, trainer, step=3)
    assert net[0].weight.data().sharding.spec == P() and len(net[0].weight.data().sharding.device_set) == 4
    assert trainer._states[net[0].weight][0].sharding.spec == P()
    plain = build_net()
    load_checkpoint(directory, plain, step=3)
    assert len(plain[0].weight.data().sharding.device_set) == 1
    for got in (params_of(net), params_of(plain)):
        for name, value in SAVED.items():
            assert np.array_equal(got[name], value), name


def check_async_on_mesh(directory):
    """An asynchronous save of sharded arrays keeps the values of the moment it was called."""
    assert RESUMED, "no resumed run to continue"
    mesh, net, trainer, run = RESUMED
    pending = save_checkpoint(directory, net, trainer, step=5, backend="orbax", asynchronous=True)
    saved = params_of(net)
    run(*DATA[0])  # training goes on while the checkpoint is written
    assert not np.array_equal(params_of(net)["0.weight"], saved["0.weight"])
    path = pending.wait_until_finished()
    assert os.path.basename(path).startswith("ckpt-00000005.")
    fresh = build_net()
    load_checkpoint(directory, fresh, make_trainer(fresh, mesh=mesh, sharding_rules=RULES), step=5)
    for name, value in params_of(fresh).items():
        assert np.array_equal(value, saved[name]), name


def main(root):
    sharded = os.path.join(root, "sharded")
    checks = {"sharded_resume": lambda: check_sharded_resume(sharded),
              "other_layouts": lambda: check_restore_onto_other_layouts(sharded),
              "async_on_mesh": lambda: check_async_on_mesh(sharded)}
    results = {}
    for name, check in checks.items():
        try:
            check()
            results[name] = "ok"
        except Exception:
            results[name] = traceback.format_exc()
    print(json.dumps(results))


if __name__ == "__main__":
    assert len(jax.devices()) == 4, jax.devices()
    sys.exit(main(sys.argv[1]))
