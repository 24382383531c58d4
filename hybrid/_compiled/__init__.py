"""Compiled forwards, the floor between ``Parameter`` and ``Block``: structural keys of block trees, a
hybridized block's ``CachedOp`` (trace -> graph passes -> XLA, cached per input signature),
``hybrid.compile``'s whole-step programs, the functional bridge (``net.state()``/``net.apply``), the
conversion of foreign inputs at a block's call, ``block.export`` and the inspection reports. Nothing here
is public: users reach it through ``hybrid``'s public modules."""
