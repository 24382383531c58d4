"""One of two processes training together over loopback; run by tests/test_distributed.py.

Environment: HYBRID_COORDINATOR (127.0.0.1:port), HYBRID_NUM_PROCESSES=2, HYBRID_PROCESS_ID.
Each process has one CPU device and feeds its half of every global batch; process 0
writes the trained parameters to the .npz file named by the first argument.
"""
import sys

import numpy as np

from hybrid import distributed

distributed.initialize(timeout=60)  # before anything creates a JAX array

import jax  # noqa: E402

from workload import batches, build_net, make_trainer, train  # noqa: E402


def main(out_path):
    assert jax.process_count() == 2 and len(jax.devices()) == 2, jax.devices()
    mesh = distributed.make_mesh()
    me = jax.process_index()

    def local_half(x, y):
        size = x.shape[0] // 2
        part = slice(me * size, (me + 1) * size)
        return distributed.shard_batch((x[part], y[part]), mesh)

    net = build_net()
    params, _ = train(net, make_trainer(net, mesh=mesh), batches(), place=local_half)
    if distributed.is_main_process():
        np.savez(out_path, **params)
    distributed.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
