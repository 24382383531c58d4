"""The small training run shared by the multi-device scripts and tests/test_distributed.py."""
import numpy as np

import hybrid
from hybrid import autograd, loss, nn

FEATURES, CLASSES, BATCH, STEPS = 6, 4, 8, 3


def batches(steps=STEPS, batch=BATCH):
    """``steps`` (x, y) pairs: float32 features and int32 labels."""
    rng = np.random.default_rng(42)
    return [(rng.standard_normal((batch, FEATURES)).astype(np.float32),
             rng.integers(0, CLASSES, batch).astype(np.int32)) for _ in range(steps)]


def build_net(norm=nn.BatchNorm, dropout=0.25):
    """Dense(16, relu) -> norm -> Dropout -> Dense(4), hybridized, same initial values on every call."""
    hybrid.random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu"), norm(), nn.Dropout(dropout), nn.Dense(CLASSES))
    net.initialize(hybrid.init.Xavier())
    net.hybridize()
    return net


def train(net, trainer, data, compiled=True, place=None):
    """Train on ``data`` with the record/backward/step loop (one hybrid.compile program when ``compiled``).

    ``place(x, y)`` turns a global batch into what the step is fed (default: unchanged).
    Returns the parameters as NumPy arrays by structural name, and the step function.
    """
    loss_fn = loss.SoftmaxCrossEntropyLoss()

    def step(x, y):
        with autograd.record():
            out = loss_fn(net(x), y)
        autograd.backward(out)
        trainer.step(x.shape[0])
        return out

    run = hybrid.compile(step) if compiled else step
    hybrid.random.seed(7)  # the same dropout masks in every run
    for x, y in data:
        run(*(place(x, y) if place else (x, y)))
    return params_of(net), run


def params_of(net):
    """Parameter values by name (replicated arrays can be read in every process)."""
    return {name: np.asarray(p.data()) for name, p in net.collect_params().items()}


def make_trainer(net, **placement):
    return hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3},
                          **placement)


def numpy_batch_norm(x, gamma, beta, head, eps=1e-5):
    """Training-mode batch norm over all axes but 1, in float64: output, the input gradient for
    cotangent ``head``, and the batch mean and biased variance per channel."""
    x, head = np.asarray(x, np.float64), np.asarray(head, np.float64)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    shape = [1] * x.ndim
    shape[1] = -1
    mean, var = x.mean(axes), x.var(axes)
    xhat = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    y = gamma.reshape(shape) * xhat + beta.reshape(shape)
    n = x.size // x.shape[1]
    sum_head = head.sum(axes).reshape(shape)
    sum_head_xhat = (head * xhat).sum(axes).reshape(shape)
    grad = gamma.reshape(shape) / np.sqrt(var.reshape(shape) + eps) / n * (n * head - sum_head - xhat * sum_head_xhat)
    return y, grad, mean, var
