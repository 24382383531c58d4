"""``mxnet.gluon.contrib.rnn`` (1.x): the projection, variational-dropout and convolutional cells and
``dynamic_unroll`` from ``hybrid.rnn``."""
from ....rnn import (Conv1DGRUCell, Conv1DLSTMCell, Conv1DRNNCell, Conv2DGRUCell, Conv2DLSTMCell, Conv2DRNNCell,
                     Conv3DGRUCell, Conv3DLSTMCell, Conv3DRNNCell, LSTMPCell, VariationalDropoutCell)
from ....rnn.rnn_cell import dynamic_unroll

__all__ = ["LSTMPCell", "VariationalDropoutCell", "dynamic_unroll", "Conv1DRNNCell", "Conv2DRNNCell",
           "Conv3DRNNCell", "Conv1DLSTMCell", "Conv2DLSTMCell", "Conv3DLSTMCell", "Conv1DGRUCell", "Conv2DGRUCell",
           "Conv3DGRUCell"]
