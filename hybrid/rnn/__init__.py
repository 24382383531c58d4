"""Recurrent layers and cells (``mxnet.gluon.rnn``): ``from hybrid import rnn``."""
from .rnn_cell import (BidirectionalCell, DropoutCell, GRUCell, HybridRecurrentCell, HybridSequentialRNNCell, LSTMCell,
                       ModifierCell, ResidualCell, RNNCell, SequentialRNNCell, ZoneoutCell)
from .rnn_layer import GRU, LSTM, RNN

__all__ = ["RNN", "LSTM", "GRU", "HybridRecurrentCell", "RNNCell", "LSTMCell", "GRUCell", "SequentialRNNCell",
           "HybridSequentialRNNCell", "BidirectionalCell", "DropoutCell", "ModifierCell", "ResidualCell",
           "ZoneoutCell"]
