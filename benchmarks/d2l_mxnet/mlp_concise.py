"""d2l 4.3 in MXNet 1.9.1: a multilayer perceptron, concise (the timing peer of examples/d2l's chapter)."""
from mxnet import gluon, init
from mxnet.gluon import nn

from common import fashion_args, load_data_fashion_mnist, train_ch3

args = fashion_args(__doc__).parse_args()
net = nn.Sequential()
net.add(nn.Dense(256, activation="relu"), nn.Dense(10))
net.initialize(init.Normal(sigma=0.01))
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": args.lr})
train_iter, test_iter = load_data_fashion_mnist(args.data, args.batch_size)
train_ch3(net, train_iter, test_iter, gluon.loss.SoftmaxCrossEntropyLoss(), args.epochs, trainer)
