"""d2l 6.6 in MXNet 1.9.1: LeNet (the timing peer of examples/d2l's chapter)."""
from mxnet.gluon import nn

from common import fashion_args, load_data_fashion_mnist, train_ch6


def lenet():
    net = nn.Sequential()
    net.add(nn.Conv2D(channels=6, kernel_size=5, padding=2, activation="sigmoid"),
            nn.AvgPool2D(pool_size=2, strides=2),
            nn.Conv2D(channels=16, kernel_size=5, activation="sigmoid"),
            nn.AvgPool2D(pool_size=2, strides=2),
            nn.Dense(120, activation="sigmoid"),
            nn.Dense(84, activation="sigmoid"),
            nn.Dense(10))
    return net


if __name__ == "__main__":
    args = fashion_args(__doc__, lr=0.9).parse_args()
    train_iter, test_iter = load_data_fashion_mnist(args.data, args.batch_size)
    train_ch6(lenet(), train_iter, test_iter, args.epochs, args.lr)
