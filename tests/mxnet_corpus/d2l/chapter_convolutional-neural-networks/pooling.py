# The MXNet cells of d2l-en's chapter_convolutional-neural-networks/pooling.md (https://github.com/d2l-ai/d2l-en), unchanged.
# %%
from d2l import mxnet as d2l
from mxnet import np, npx
from mxnet.gluon import nn
npx.set_np()
# %%
def pool2d(X, pool_size, mode='max'):
    p_h, p_w = pool_size
    Y = d2l.zeros((X.shape[0] - p_h + 1, X.shape[1] - p_w + 1))
    for i in range(Y.shape[0]):
        for j in range(Y.shape[1]):
            if mode == 'max':
                Y[i, j] = X[i: i + p_h, j: j + p_w].max()
            elif mode == 'avg':
                Y[i, j] = X[i: i + p_h, j: j + p_w].mean()
    return Y
# %%
X = d2l.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]])
pool2d(X, (2, 2))
# %%
pool2d(X, (2, 2), 'avg')
# %%
X = d2l.reshape(d2l.arange(16, dtype=d2l.float32), (1, 1, 4, 4))
X
# %%
pool2d = nn.MaxPool2D(3)
# Pooling has no model parameters, hence it needs no initialization
pool2d(X)
# %%
pool2d = nn.MaxPool2D(3, padding=1, strides=2)
pool2d(X)
# %%
pool2d = nn.MaxPool2D((2, 3), padding=(0, 1), strides=(2, 3))
pool2d(X)
# %%
X = d2l.concat((X, X + 1), 1)
X
# %%
pool2d = nn.MaxPool2D(3, padding=1, strides=2)
pool2d(X)
