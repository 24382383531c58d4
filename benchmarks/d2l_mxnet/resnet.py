"""d2l 7.6 in MXNet 1.9.1: ResNet-18 with adjustable widths and input size (the timing peer of
examples/d2l's chapter)."""
from mxnet import gluon
from mxnet.gluon import nn
from mxnet.gluon.data.vision import transforms

from common import fashion_args, load_data_fashion_mnist, train_ch6


class Residual(nn.Block):
    def __init__(self, num_channels, use_1x1conv=False, strides=1, **kwargs):
        super().__init__(**kwargs)
        self.conv1 = nn.Conv2D(num_channels, kernel_size=3, padding=1, strides=strides)
        self.conv2 = nn.Conv2D(num_channels, kernel_size=3, padding=1)
        self.conv3 = nn.Conv2D(num_channels, kernel_size=1, strides=strides) if use_1x1conv else None
        self.bn1 = nn.BatchNorm()
        self.bn2 = nn.BatchNorm()

    def forward(self, X):
        Y = self.bn1(self.conv1(X)).relu()
        Y = self.bn2(self.conv2(Y))
        if self.conv3:
            X = self.conv3(X)
        return (Y + X).relu()


def resnet_block(num_channels, num_residuals, first_block=False):
    blk = nn.Sequential()
    for i in range(num_residuals):
        blk.add(Residual(num_channels, use_1x1conv=True, strides=2) if i == 0 and not first_block
                else Residual(num_channels))
    return blk


def resnet18(num_classes, channels):
    net = nn.Sequential()
    net.add(nn.Conv2D(channels[0], kernel_size=7, strides=2, padding=3), nn.BatchNorm(), nn.Activation("relu"),
            nn.MaxPool2D(pool_size=3, strides=2, padding=1))
    net.add(resnet_block(channels[0], 2, first_block=True), *(resnet_block(c, 2) for c in channels[1:]))
    net.add(nn.GlobalAvgPool2D(), nn.Dense(num_classes))
    return net


if __name__ == "__main__":
    parser = fashion_args(__doc__, lr=0.05)
    parser.add_argument("--resize", type=int, default=96)
    parser.add_argument("--width", type=int, default=64)
    args = parser.parse_args()
    train_iter, test_iter = load_data_fashion_mnist(args.data, args.batch_size, resize=args.resize)
    width = args.width
    train_ch6(resnet18(10, (width, 2 * width, 4 * width, 8 * width)), train_iter, test_iter, args.epochs, args.lr)
