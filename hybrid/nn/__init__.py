"""Neural-network layers."""
from ..block import Block, HybridBlock  # noqa: F401
from .activations import Activation
from .basic_layers import (BatchNorm, Dense, Dropout, Embedding, Flatten, HybridLambda, HybridSequential, Lambda,
                           LayerNorm, Sequential)
from .conv_layers import (AvgPool1D, AvgPool2D, AvgPool3D, Conv1D, Conv2D, Conv3D, GlobalAvgPool1D,
                          GlobalAvgPool2D, GlobalAvgPool3D, GlobalMaxPool1D, GlobalMaxPool2D, GlobalMaxPool3D,
                          MaxPool1D, MaxPool2D, MaxPool3D)
from .activations import ELU, GELU, LeakyReLU, PReLU, SELU, SiLU, Swish
from .attention import MultiHeadAttention, TransformerEncoderLayer
from .basic_layers import Concatenate, HybridConcatenate, Identity
from .conv_layers import (Conv1DTranspose, Conv2DTranspose, Conv3DTranspose, PixelShuffle1D, PixelShuffle2D,
                          PixelShuffle3D, ReflectionPad2D)
from .norm_layers import GroupNorm, InstanceNorm
from .sync_batchnorm import SyncBatchNorm

__all__ = ["Block", "HybridBlock", "Activation", "Sequential", "HybridSequential", "Dense", "Dropout",
           "BatchNorm", "LayerNorm", "Embedding", "Flatten", "Lambda", "HybridLambda", "Conv1D", "Conv2D",
           "Conv3D", "MaxPool1D", "MaxPool2D", "MaxPool3D", "AvgPool1D", "AvgPool2D", "AvgPool3D",
           "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPool3D", "GlobalAvgPool1D", "GlobalAvgPool2D",
           "GlobalAvgPool3D",
           "LeakyReLU", "PReLU", "ELU", "SELU", "GELU", "SiLU", "Swish", "MultiHeadAttention",
           "TransformerEncoderLayer", "Identity", "Concatenate", "HybridConcatenate", "PixelShuffle1D",
           "PixelShuffle2D", "PixelShuffle3D", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose",
           "ReflectionPad2D", "GroupNorm", "InstanceNorm", "SyncBatchNorm"]
