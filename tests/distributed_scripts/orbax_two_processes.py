"""One of two processes that checkpoint together with orbax over loopback; run by
tests/test_checkpoint_orbax.py.

Environment as for two_processes.py. Arguments: the checkpoint directory and an output .npz. The first
Dense weight is split over the two processes (each holds and writes half of it). The processes train 2
steps, save step 2, train 1 more step; then restore step 2, train the same step again and check that it
reproduces the parameters bit for bit. Finally they save step 3 asynchronously and exit without waiting:
the checkpoint must still be complete. Process 0 writes the parameters after step 3 to the .npz file.
"""
import sys

import numpy as np

from hybrid import distributed

distributed.initialize(timeout=60)  # before anything creates a JAX array

import jax  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import hybrid  # noqa: E402
from hybrid.export import load_checkpoint, save_checkpoint  # noqa: E402
from orbax_steps import stepper  # noqa: E402
from workload import batches, build_net, make_trainer  # noqa: E402

RULES = [(r"^0\.weight$", P("data", None))]


def gathered(net):
    """Every parameter's full value, in every process (the split weight is gathered across processes)."""
    return {name: np.asarray(multihost_utils.process_allgather(p.data(), tiled=True))
            for name, p in net.collect_params().items()}


def main(directory, out_path):
    assert jax.process_count() == 2 and len(jax.devices()) == 2, jax.devices()
    mesh = distributed.make_mesh()
    me = jax.process_index()
    data = batches(steps=3)

    def place(x, y):  # this process's half of the global batch
        size = x.shape[0] // 2
        return x[me * size:(me + 1) * size], y[me * size:(me + 1) * size]

    net = build_net()
    trainer = make_trainer(net, mesh=mesh, sharding_rules=RULES)
    run = stepper(net, trainer, mesh)
    hybrid.random.seed(7)
    for x, y in data[:2]:
        run(*place(x, y))
    assert not net[0].weight.data().is_fully_addressable  # really split across the processes
    save_checkpoint(directory, net, trainer, step=2, backend="orbax")
    run(*place(*data[2]))
    straight = gathered(net)

    # back to step 2 in the same net and Trainer (their programs are compiled already): the restored
    # arrays keep the split, and the step reproduces the parameters bit for bit
    sharding = net[0].weight.data().sharding
    hybrid.random.seed(99)
    assert load_checkpoint(directory, net, trainer)["step"] == 2
    assert net[0].weight.data().sharding == sharding and trainer._states[net[0].weight][0].sharding == sharding
    run(*place(*data[2]))
    resumed = gathered(net)
    for name, value in straight.items():
        assert np.array_equal(resumed[name], value), name

    if distributed.is_main_process():
        np.savez(out_path, **straight)
    save_checkpoint(directory, net, trainer, step=3, backend="orbax", asynchronous=True)
    # no wait and no shutdown: the end of the process waits for the write, then JAX leaves the cluster


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
