# The MXNet cells of d2l-en's chapter_builders-guide/lazy-init.md (https://github.com/d2l-ai/d2l-en), unchanged.
# %%
from mxnet import np, npx
from mxnet.gluon import nn
npx.set_np()
# %%
net = nn.Sequential()
net.add(nn.Dense(256, activation='relu'))
net.add(nn.Dense(10))
# %%
print(net.collect_params)
print(net.collect_params())
# %%
net.initialize()
net.collect_params()
# %%
X = np.random.uniform(size=(2, 20))
net(X)

net.collect_params()
