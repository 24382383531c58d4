# The MXNet cells of d2l-en's chapter_preliminaries/linear-algebra.md (https://github.com/d2l-ai/d2l-en), unchanged.
# %%
from mxnet import np, npx
npx.set_np()
# %%
x = np.array(3.0)
y = np.array(2.0)

x + y, x * y, x / y, x ** y
# %%
x = np.arange(3)
x
# %%
x[2]
# %%
len(x)
# %%
x.shape
# %%
A = np.arange(6).reshape(3, 2)
A
# %%
A.T
# %%
A = np.array([[1, 2, 3], [2, 0, 4], [3, 4, 5]])
A == A.T
# %%
np.arange(24).reshape(2, 3, 4)
# %%
A = np.arange(6).reshape(2, 3)
B = A.copy()  # Assign a copy of A to B by allocating new memory
A, A + B
# %%
A * B
# %%
a = 2
X = np.arange(24).reshape(2, 3, 4)
a + X, (a * X).shape
# %%
x = np.arange(3)
x, x.sum()
# %%
A.shape, A.sum()
# %%
A.shape, A.sum(axis=0).shape
# %%
A.shape, A.sum(axis=1).shape
# %%
A.sum(axis=[0, 1]) == A.sum()  # Same as A.sum()
# %%
A.mean(), A.sum() / A.size
# %%
A.mean(axis=0), A.sum(axis=0) / A.shape[0]
# %%
sum_A = A.sum(axis=1, keepdims=True)
sum_A, sum_A.shape
# %%
A / sum_A
# %%
A.cumsum(axis=0)
# %%
y = np.ones(3)
x, y, np.dot(x, y)
# %%
np.sum(x * y)
# %%
A.shape, x.shape, np.dot(A, x)
# %%
B = np.ones(shape=(3, 4))
np.dot(A, B)
# %%
u = np.array([3, -4])
np.linalg.norm(u)
# %%
np.abs(u).sum()
# %%
np.linalg.norm(np.ones((4, 9)))
