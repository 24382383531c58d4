"""d2l 3.7 in MXNet 1.9.1: softmax regression, concise (the timing peer of examples/d2l's chapter)."""
from mxnet import gluon, init
from mxnet.gluon import nn

from common import fashion_args, load_data_fashion_mnist, train_ch3

args = fashion_args(__doc__).parse_args()
train_iter, test_iter = load_data_fashion_mnist(args.data, args.batch_size)
net = nn.Sequential()
net.add(nn.Dense(10))
net.initialize(init.Normal(sigma=0.01))
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": args.lr})
train_ch3(net, train_iter, test_iter, gluon.loss.SoftmaxCrossEntropyLoss(), args.epochs, trainer)
