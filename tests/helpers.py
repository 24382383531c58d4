"""Shared helpers for tests: running a block eagerly and hybridized and collecting gradients."""
import copy

import numpy as np

from hybrid import autograd


def run_with_grads(net, inputs, training, head_grad_seed=0):
    """Forward ``net`` on ``inputs`` under record (train or predict mode) and backward with a fixed
    random head gradient; returns (output as numpy, {param name: grad as numpy})."""
    with autograd.record(train_mode=training):
        out = net(*inputs)
    rng = np.random.default_rng(head_grad_seed)
    head = rng.standard_normal(out.shape).astype(np.float32)
    autograd.backward(out, head_grads=head)
    grads = {name: np.asarray(p.grad()) for name, p in net.collect_params().items() if p.grad_req != "null"}
    return np.asarray(out), grads


def clone_params(src, dst):
    """Copy parameter values from ``src`` to ``dst`` (same structure)."""
    for (name, p), (name2, q) in zip(src.collect_params().items(), dst.collect_params().items()):
        assert name == name2
        q.set_data(np.asarray(p.data()))
