"""Convolution-family layers (hybrid/nn/conv_layers.py): transposed and 1-D/3-D convolutions, 1-D/3-D,
channels-last and global pooling, pixel shuffle and reflection padding. Forward against NumPy,
hybridized against eager (outputs and gradients), gradients against finite differences of the NumPy
reference, and deferred shapes."""
import numpy as np
import pytest

from hybrid import nn

import references_nn as refn
from helpers import LayerCase, layer_case_tests


def _last(reference):
    """A channels-first reference applied to channels-last data (input and weight moved)."""
    def run(a):
        moved = dict(a, x=np.moveaxis(a["x"], -1, 1))
        if "weight" in a:
            moved["weight"] = np.moveaxis(a["weight"], -1, 1)
        return np.moveaxis(reference(moved), 1, -1)
    return run


def _conv(*args):
    return lambda a: refn.conv_nd(a["x"], a["weight"], a.get("bias"), *args)


def _deconv(*args):
    return lambda a: refn.conv_transpose_nd(a["x"], a["weight"], a.get("bias"), *args)


def _pool(*args):
    return lambda a: refn.pool_nd(a["x"], *args)


CASES = [
    LayerCase("conv1d_nwc", lambda: nn.Conv1D(4, 3, strides=2, padding=1, dilation=2, layout="NWC", in_channels=3),
              (2, 9, 3), _last(_conv((2,), (1,), (2,), 1))),
    LayerCase("conv3d_grouped", lambda: nn.Conv3D(4, (2, 3, 2), strides=(1, 2, 1), padding=(1, 0, 1), groups=2),
              (1, 4, 3, 5, 3), _conv((1, 2, 1), (1, 0, 1), (1, 1, 1), 2)),
    LayerCase("conv3d_ndhwc_relu", lambda: nn.Conv3D(3, 2, layout="NDHWC", activation="relu"), (1, 3, 4, 3, 2),
              lambda a: np.maximum(_last(_conv((1,) * 3, (0,) * 3, (1,) * 3, 1))(a), 0)),
    LayerCase("conv1d_transpose", lambda: nn.Conv1DTranspose(4, 3, strides=2, padding=1, output_padding=1,
                                                             in_channels=3), (2, 3, 5),
              _deconv((2,), (1,), (1,), (1,), 1)),
    LayerCase("conv1d_transpose_nwc", lambda: nn.Conv1DTranspose(2, 3, strides=3, layout="NWC", use_bias=False),
              (2, 4, 3), _last(_deconv((3,), (0,), (0,), (1,), 1))),
    LayerCase("conv2d_transpose_grouped_dilated",
              lambda: nn.Conv2DTranspose(4, (3, 2), strides=(2, 1), padding=(1, 0), output_padding=(1, 0),
                                         dilation=(1, 2), groups=2), (2, 4, 4, 3),
              _deconv((2, 1), (1, 0), (1, 0), (1, 2), 2)),
    LayerCase("conv2d_transpose_nhwc_tanh", lambda: nn.Conv2DTranspose(3, 3, strides=2, padding=1, layout="NHWC",
                                                                       activation="tanh"), (2, 3, 3, 2),
              lambda a: np.tanh(_last(_deconv((2, 2), (1, 1), (0, 0), (1, 1), 1))(a))),
    LayerCase("conv3d_transpose", lambda: nn.Conv3DTranspose(2, 2, strides=(2, 1, 2), padding=(0, 1, 0)),
              (1, 3, 2, 3, 2), _deconv((2, 1, 2), (0, 1, 0), (0, 0, 0), (1, 1, 1), 1)),
    LayerCase("conv3d_transpose_ndhwc", lambda: nn.Conv3DTranspose(2, (1, 2, 2), strides=2, output_padding=1,
                                                                   layout="NDHWC"), (1, 2, 2, 2, 3),
              _last(_deconv((2,) * 3, (0,) * 3, (1,) * 3, (1,) * 3, 1))),
    LayerCase("maxpool1d", lambda: nn.MaxPool1D(3, 2, 1), (2, 3, 9), _pool((3,), (2,), (1,), "max")),
    LayerCase("avgpool1d_nwc_ceil_exclude_pad",
              lambda: nn.AvgPool1D(3, 2, 1, layout="NWC", ceil_mode=True, count_include_pad=False), (2, 8, 3),
              _last(_pool((3,), (2,), (1,), "avg", True, False))),
    LayerCase("maxpool3d_ceil", lambda: nn.MaxPool3D(2, 2, ceil_mode=True), (1, 2, 5, 3, 4),
              _pool((2,) * 3, (2,) * 3, (0,) * 3, "max", True)),
    LayerCase("avgpool3d_ndhwc_ceil_include_pad", lambda: nn.AvgPool3D(3, 2, 1, layout="NDHWC", ceil_mode=True),
              (1, 5, 4, 6, 2), _last(_pool((3,) * 3, (2,) * 3, (1,) * 3, "avg", True, True))),
    LayerCase("avgpool3d_exclude_pad", lambda: nn.AvgPool3D((2, 3, 2), (1, 2, 2), (1, 1, 0), count_include_pad=False),
              (1, 2, 3, 5, 4), _pool((2, 3, 2), (1, 2, 2), (1, 1, 0), "avg", False, False)),
    LayerCase("global_maxpool1d", lambda: nn.GlobalMaxPool1D(), (2, 3, 5), lambda a: a["x"].max(2, keepdims=True)),
    LayerCase("global_avgpool1d_nwc", lambda: nn.GlobalAvgPool1D(layout="NWC"), (2, 5, 3),
              lambda a: a["x"].mean(1, keepdims=True)),
    LayerCase("global_maxpool3d_ndhwc", lambda: nn.GlobalMaxPool3D(layout="NDHWC"), (1, 3, 2, 4, 2),
              lambda a: a["x"].max((1, 2, 3), keepdims=True)),
    LayerCase("global_avgpool3d", lambda: nn.GlobalAvgPool3D(), (1, 2, 3, 2, 4),
              lambda a: a["x"].mean((2, 3, 4), keepdims=True)),
    LayerCase("pixelshuffle1d", lambda: nn.PixelShuffle1D(3), (2, 6, 4), lambda a: refn.pixel_shuffle(a["x"], (3,))),
    LayerCase("pixelshuffle2d", lambda: nn.PixelShuffle2D((2, 3)), (1, 12, 2, 3),
              lambda a: refn.pixel_shuffle(a["x"], (2, 3))),
    LayerCase("pixelshuffle3d", lambda: nn.PixelShuffle3D(2), (1, 16, 2, 1, 2),
              lambda a: refn.pixel_shuffle(a["x"], (2, 2, 2))),
    LayerCase("reflectionpad2d", lambda: nn.ReflectionPad2D((1, 2, 2, 0)), (1, 2, 4, 3),
              lambda a: np.pad(a["x"], ((0, 0), (0, 0), (1, 2), (2, 0)), mode="reflect")),
]
globals().update(layer_case_tests(CASES))


@pytest.mark.parametrize("hybridize", [False, True])
def test_conv_transpose_deferred_shapes(hybridize):
    layer = nn.Conv2DTranspose(6, 3, strides=2, padding=1, output_padding=1, groups=3)
    layer.initialize()
    if hybridize:
        layer.hybridize()
    out = layer(np.ones((2, 9, 4, 5), np.float32))
    assert out.shape == (2, 6, 8, 10)
    assert layer.weight.shape == (9, 2, 3, 3) and layer.bias.shape == (6,)
