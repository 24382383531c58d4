"""What the MXNet chapters share (d2l's MXNet edition, reduced): the synthetic Fashion-MNIST saved by
``bench_first_step.py``, accuracy, and d2l's ``train_ch3`` / ``train_ch6`` loops, printing per epoch the
lines hybrid's chapters print."""
import time

import numpy as np
from mxnet import autograd, gluon, init, nd
from mxnet.gluon.data.vision import transforms


def load_data_fashion_mnist(path, batch_size, resize=None):
    """Training and test DataLoaders of the saved images: ``(B, 1, H, W)`` float32 in [0, 1]."""
    arrays = np.load(path)
    trans = transforms.Compose(([transforms.Resize(resize)] if resize else []) + [transforms.ToTensor()])
    train, test = (gluon.data.ArrayDataset(nd.array(arrays[f"{part}_x"], dtype="uint8"),
                                           nd.array(arrays[f"{part}_y"], dtype="float32")).transform_first(trans)
                   for part in ("train", "test"))
    return (gluon.data.DataLoader(train, batch_size, shuffle=True, last_batch="discard"),
            gluon.data.DataLoader(test, batch_size, shuffle=False))


def accuracy(y_hat, y):
    return float((y_hat.argmax(axis=1).astype(y.dtype) == y).sum().asscalar())


def evaluate_accuracy(net, data_iter):
    correct, total = 0.0, 0
    for X, y in data_iter:
        correct += accuracy(net(X), y)
        total += y.size
    return correct / total


def train_ch3(net, train_iter, test_iter, loss, num_epochs, trainer):
    start, seen = time.perf_counter(), 0
    for epoch in range(num_epochs):
        metric = [0.0, 0.0, 0]
        for X, y in train_iter:
            with autograd.record():
                y_hat = net(X)
                l = loss(y_hat, y)
            l.backward()
            trainer.step(X.shape[0])
            metric = [metric[0] + float(l.sum().asscalar()), metric[1] + accuracy(y_hat, y), metric[2] + y.size]
        seen += metric[2]
        test_acc = evaluate_accuracy(net, test_iter)
        print(f"epoch {epoch + 1}, loss {metric[0] / metric[2]:.3f}, train acc {metric[1] / metric[2]:.3f}, "
              f"test acc {test_acc:.3f}", flush=True)
    print(f"{seen / (time.perf_counter() - start):.1f} examples/sec")


def train_ch6(net, train_iter, test_iter, num_epochs, lr):
    net.initialize(force_reinit=True, init=init.Xavier())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": lr})
    train_ch3(net, train_iter, test_iter, gluon.loss.SoftmaxCrossEntropyLoss(), num_epochs, trainer)


def fashion_args(description, epochs=10, lr=0.1, batch_size=256):
    import argparse
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", required=True, help="the .npz written by bench_first_step.py")
    parser.add_argument("--epochs", type=int, default=epochs)
    parser.add_argument("--lr", type=float, default=lr)
    parser.add_argument("--batch-size", type=int, default=batch_size)
    return parser
