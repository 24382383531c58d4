"""Recurrent layers and cells (``mxnet.gluon.rnn``): ``from hybrid import rnn``."""
from .conv_rnn_cell import (Conv1DGRUCell, Conv1DLSTMCell, Conv1DRNNCell, Conv2DGRUCell, Conv2DLSTMCell, Conv2DRNNCell,
                            Conv3DGRUCell, Conv3DLSTMCell, Conv3DRNNCell)
from .rnn_cell import (BidirectionalCell, DropoutCell, GRUCell, HybridRecurrentCell, HybridSequentialRNNCell, LSTMCell,
                       LSTMPCell, ModifierCell, ResidualCell, RNNCell, SequentialRNNCell, VariationalDropoutCell,
                       ZoneoutCell)
from .rnn_layer import GRU, LSTM, RNN

__all__ = ["RNN", "LSTM", "GRU", "HybridRecurrentCell", "RNNCell", "LSTMCell", "GRUCell", "LSTMPCell",
           "SequentialRNNCell", "HybridSequentialRNNCell", "BidirectionalCell", "DropoutCell", "ModifierCell",
           "ResidualCell", "ZoneoutCell", "VariationalDropoutCell",
           "Conv1DRNNCell", "Conv2DRNNCell", "Conv3DRNNCell", "Conv1DLSTMCell", "Conv2DLSTMCell", "Conv3DLSTMCell",
           "Conv1DGRUCell", "Conv2DGRUCell", "Conv3DGRUCell"]
