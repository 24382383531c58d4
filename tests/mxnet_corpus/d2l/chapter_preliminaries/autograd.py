# The MXNet cells of d2l-en's chapter_preliminaries/autograd.md (https://github.com/d2l-ai/d2l-en), unchanged.
# %%
from mxnet import autograd, np, npx
npx.set_np()
# %%
x = np.arange(4.0)
x
# %%
# We allocate memory for a tensor's gradient by invoking `attach_grad`
x.attach_grad()
# After we calculate a gradient taken with respect to `x`, we will be able to
# access it via the `grad` attribute, whose values are initialized with 0s
x.grad
# %%
# Our code is inside an `autograd.record` scope to build the computational
# graph
with autograd.record():
    y = 2 * np.dot(x, x)
y
# %%
y.backward()
x.grad
# %%
x.grad == 4 * x
# %%
with autograd.record():
    y = x.sum()
y.backward()
x.grad  # Overwritten by the newly calculated gradient
# %%
with autograd.record():
    y = x * x  
y.backward()
x.grad  # Equals the gradient of y = sum(x * x)
# %%
with autograd.record():
    y = x * x
    u = y.detach()
    z = u * x
z.backward()
x.grad == u
# %%
y.backward()
x.grad == 2 * x
# %%
def f(a):
    b = a * 2
    while np.linalg.norm(b) < 1000:
        b = b * 2
    if b.sum() > 0:
        c = b
    else:
        c = 100 * b
    return c
# %%
a = np.random.normal()
a.attach_grad()
with autograd.record():
    d = f(a)
d.backward()
# %%
a.grad == d / a
