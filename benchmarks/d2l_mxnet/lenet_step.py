"""MXNet 1.9.1 eager LeNet step for bench_first_step.py part 1: prints the first and the steady step's
seconds as JSON (batch 128 of 1x28x28, SGD, the loss read back every step)."""
import argparse
import json
import statistics
import time

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon, init

from lenet import lenet

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--steps", type=int, default=20)
args = parser.parse_args()
rng = np.random.default_rng(0)
X = mx.nd.array(rng.random((128, 1, 28, 28), dtype=np.float32))
y = mx.nd.array(rng.integers(0, 10, 128).astype(np.float32))
mx.random.seed(0)
net = lenet()
net.initialize(init.Xavier())
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.9})
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()


def step():
    with autograd.record():
        l = loss_fn(net(X), y)
    l.backward()
    trainer.step(128)
    float(l.sum().asscalar())


start = time.perf_counter()
step()
first = time.perf_counter() - start
for _ in range(3):
    step()
times = []
for _ in range(args.steps):
    start = time.perf_counter()
    step()
    times.append(time.perf_counter() - start)
print(json.dumps({"first": first, "steady": statistics.median(times)}))
