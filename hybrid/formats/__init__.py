"""File formats that take names, arrays and graphs, never Parameters or Blocks: array files with atomic
writes (``serialization``), parameter files (``params_file``: hybrid's ``.npz``, ``.safetensors`` and
MXNet's ``.params``), JSON files (``jsonfile``), graphs as JSON (``codec``, ``graph_json``, ``prims``,
``inline``) and symbol files (``symbol_json``), graphs written in code (``builder``), and the checkpoint
backend base (``checkpoint_backend``). The public names are re-exported by :mod:`hybrid.export`."""
