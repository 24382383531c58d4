"""The runtime below ``Parameter``: the execution context and its modes, scopes, the random stream, state
cells and their lock, the functional frames, ``autograd.Function``, the memory report, the lazy recorder
that records a step (``lazy``) and the backward engine that drives it (``gradients``). Nothing here is
public: users reach it through ``hybrid``'s public modules."""
