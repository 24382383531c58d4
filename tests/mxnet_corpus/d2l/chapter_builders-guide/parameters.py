# The MXNet cells of d2l-en's chapter_builders-guide/parameters.md (https://github.com/d2l-ai/d2l-en), unchanged.
# %%
from mxnet import init, np, npx
from mxnet.gluon import nn
npx.set_np()
# %%
net = nn.Sequential()
net.add(nn.Dense(8, activation='relu'))
net.add(nn.Dense(1))
net.initialize()  # Use the default initialization method

X = np.random.uniform(size=(2, 4))
net(X).shape
# %%
net[1].params
# %%
type(net[1].bias), net[1].bias.data()
# %%
net[1].weight.grad()
# %%
net.collect_params()
# %%
net = nn.Sequential()
# We need to give the shared layer a name so that we can refer to its
# parameters
shared = nn.Dense(8, activation='relu')
net.add(nn.Dense(8, activation='relu'),
        shared,
        nn.Dense(8, activation='relu', params=shared.params),
        nn.Dense(10))
net.initialize()

X = np.random.uniform(size=(2, 20))

net(X)
# Check whether the parameters are the same
print(net[1].weight.data()[0] == net[2].weight.data()[0])
net[1].weight.data()[0, 0] = 100
# Make sure that they are actually the same object rather than just having the
# same value
print(net[1].weight.data()[0] == net[2].weight.data()[0])
