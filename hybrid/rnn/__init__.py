"""Recurrent layers and cells (``mxnet.gluon.rnn``): ``from hybrid import rnn``."""
from .rnn_cell import (BidirectionalCell, DropoutCell, GRUCell, HybridRecurrentCell, LSTMCell, RNNCell,
                       SequentialRNNCell)
from .rnn_layer import GRU, LSTM, RNN

__all__ = ["RNN", "LSTM", "GRU", "HybridRecurrentCell", "RNNCell", "LSTMCell", "GRUCell", "SequentialRNNCell",
           "BidirectionalCell", "DropoutCell"]
