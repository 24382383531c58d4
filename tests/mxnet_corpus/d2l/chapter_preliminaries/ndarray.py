# The MXNet cells of d2l-en's chapter_preliminaries/ndarray.md (https://github.com/d2l-ai/d2l-en), unchanged.
# %%
from mxnet import np, npx
npx.set_np()
# %%
x = np.arange(12)
x
# %%
x.size
# %%
x.shape
# %%
X = x.reshape(3, 4)
X
# %%
np.zeros((2, 3, 4))
# %%
np.ones((2, 3, 4))
# %%
np.random.normal(0, 1, size=(3, 4))
# %%
np.array([[2, 1, 4, 3], [1, 2, 3, 4], [4, 3, 2, 1]])
# %%
X[-1], X[1:3]
# %%
X[1, 2] = 17
X
# %%
X[:2, :] = 12
X
# %%
np.exp(x)
# %%
x = np.array([1, 2, 4, 8])
y = np.array([2, 2, 2, 2])
x + y, x - y, x * y, x / y, x ** y
# %%
X = np.arange(12).reshape(3, 4)
Y = np.array([[2, 1, 4, 3], [1, 2, 3, 4], [4, 3, 2, 1]])
np.concatenate([X, Y], axis=0), np.concatenate([X, Y], axis=1)
# %%
X == Y
# %%
X.sum()
# %%
a = np.arange(3).reshape(3, 1)
b = np.arange(2).reshape(1, 2)
a, b
# %%
a + b
# %%
before = id(Y)
Y = Y + X
id(Y) == before
# %%
Z = np.zeros_like(Y)
print('id(Z):', id(Z))
Z[:] = X + Y
print('id(Z):', id(Z))
# %%
before = id(X)
X += Y
id(X) == before
# %%
A = X.asnumpy()
B = np.array(A)
type(A), type(B)
# %%
a = np.array([3.5])
a, a.item(), float(a), int(a)
