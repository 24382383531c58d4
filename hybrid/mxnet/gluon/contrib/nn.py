"""``mxnet.gluon.contrib.nn`` (1.x): ``Concurrent``/``HybridConcurrent`` (Gluon 2.0's ``Concatenate``),
``Identity``, ``SyncBatchNorm`` and ``PixelShuffle1D/2D/3D`` from ``hybrid.nn``."""
from ....nn import (Concatenate as Concurrent, HybridConcatenate as HybridConcurrent, Identity, PixelShuffle1D,
                    PixelShuffle2D, PixelShuffle3D, SyncBatchNorm)

__all__ = ["Concurrent", "HybridConcurrent", "Identity", "SyncBatchNorm", "PixelShuffle1D", "PixelShuffle2D",
           "PixelShuffle3D"]
