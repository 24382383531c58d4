"""d2l 3.2 in MXNet 1.9.1: linear regression from scratch (the timing peer of examples/d2l's chapter)."""
import argparse

import numpy as np
from mxnet import autograd, np as mnp, npx

npx.set_np()


def synthetic_data(w, b, num_examples, rng):
    X = rng.normal(0, 1, (num_examples, len(w))).astype(np.float32)
    y = X @ w + b + rng.normal(0, 0.01, num_examples)
    return X, y.reshape((-1, 1)).astype(np.float32)


def data_iter(batch_size, features, labels, rng):
    indices = rng.permutation(len(features))
    for i in range(0, len(features), batch_size):
        j = mnp.array(indices[i:i + batch_size])
        yield features[j], labels[j]


def linreg(X, w, b):
    return mnp.dot(X, w) + b


def squared_loss(y_hat, y):
    return (y_hat - y.reshape(y_hat.shape)) ** 2 / 2


def sgd(params, lr, batch_size):
    for param in params:
        param[:] = param - lr * param.grad / batch_size


parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--data", help="unused: the data is made here, as in the book")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.03)
parser.add_argument("--batch-size", type=int, default=10)
args = parser.parse_args()
rng = np.random.default_rng(0)
true_w, true_b = np.array([2, -3.4], np.float32), 4.2
features, labels = (mnp.array(a) for a in synthetic_data(true_w, true_b, 1000, rng))
w = mnp.array(rng.normal(0, 0.01, (2, 1)).astype(np.float32))
b = mnp.zeros(1)
w.attach_grad()
b.attach_grad()
for epoch in range(args.epochs):
    for X, y in data_iter(args.batch_size, features, labels, rng):
        with autograd.record():
            l = squared_loss(linreg(X, w, b), y)
        l.backward()
        sgd([w, b], args.lr, args.batch_size)
    train_l = squared_loss(linreg(features, w, b), labels)
    print(f"epoch {epoch + 1}, loss {float(train_l.mean()):f}", flush=True)
print(f"error in estimating w: {true_w - w.asnumpy().reshape(true_w.shape)}")
print(f"error in estimating b: {true_b - float(b.asnumpy()[0])}")
