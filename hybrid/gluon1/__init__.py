"""The Gluon 1.x library: MXNet's operator table with MXNet's attribute semantics (``ops``, the ``F`` of
``hybrid_forward``), the machinery of ``hybrid_forward`` blocks (``blocks``: ``F``, deferred shapes by
MXNet's rules) and the runner of MXNet symbol graphs (``symbol_graph``). It serves ``HybridBlock``,
``SymbolBlock`` and the MXNet alias (:mod:`hybrid.mxnet`) alike; public as ``hybrid.mxnet.ops``."""
