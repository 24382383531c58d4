"""Files: symbol graphs (export/import), parameter files, checkpoints, deployment export, MXNet formats.

    net.export("model")                                      # model-symbol.json, model-0000.params
    net2 = hybrid.SymbolBlock.imports("model-symbol.json", ["data"], "model-0000.params")
    hybrid.export.save_checkpoint("ckpt", net, trainer, step=100)
    hybrid.export.export_deployment(net, "model.jaxexport", x, dynamic_batch=True)
    hybrid.export.to_onnx(net, "model.onnx", x)                # needs hybrid[onnx]

File formats are described in docs/file-formats.md.
"""
from ..formats.builder import GraphBuilder
from .checkpoint import PendingCheckpoint, list_checkpoints, load_checkpoint, save_checkpoint
from .deploy import export_deployment, load_deployment
from ..errors import ExportError, FormatError
from ..formats.graph_json import NodeCodec, register_node_codec
from ..formats.mxnet_params import parse_mxnet_params
from .onnx import to_onnx
from ..formats.params_file import load_parameter_file
from ..symbol_block import SymbolBlock
from .._compiled.symbol_export import export_block

__all__ = ["GraphBuilder", "SymbolBlock", "export_block", "save_checkpoint", "load_checkpoint", "list_checkpoints",
           "PendingCheckpoint",
           "export_deployment", "load_deployment", "to_onnx", "load_parameter_file", "parse_mxnet_params",
           "ExportError", "FormatError", "NodeCodec", "register_node_codec"]
