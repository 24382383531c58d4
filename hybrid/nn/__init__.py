"""Neural-network layers."""
from ..block import Block, HybridBlock  # noqa: F401
from .activations import Activation
from .basic_layers import (BatchNorm, Dense, Dropout, Embedding, Flatten, HybridLambda, HybridSequential, Lambda,
                           LayerNorm, Sequential)
from .conv_layers import (AvgPool1D, AvgPool2D, AvgPool3D, Conv1D, Conv2D, Conv3D, GlobalAvgPool1D,
                          GlobalAvgPool2D, GlobalAvgPool3D, GlobalMaxPool1D, GlobalMaxPool2D, GlobalMaxPool3D,
                          MaxPool1D, MaxPool2D, MaxPool3D)
from .sync_batchnorm import SyncBatchNorm

__all__ = ["Block", "HybridBlock", "Activation", "Sequential", "HybridSequential", "Dense", "Dropout",
           "BatchNorm", "LayerNorm", "Embedding", "Flatten", "Lambda", "HybridLambda", "Conv1D", "Conv2D",
           "Conv3D", "MaxPool1D", "MaxPool2D", "MaxPool3D", "AvgPool1D", "AvgPool2D", "AvgPool3D",
           "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPool3D", "GlobalAvgPool1D", "GlobalAvgPool2D",
           "GlobalAvgPool3D", "SyncBatchNorm"]
