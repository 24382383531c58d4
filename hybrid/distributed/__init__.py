"""Training on several devices and hosts with JAX's own machinery: meshes, shardings, XLA collectives.

    mesh = hybrid.distributed.make_mesh(4)                        # 1-D mesh, axis 'data'
    trainer = hybrid.Trainer(net.collect_params(), 'sgd', {...}, mesh=mesh)
    x, y = hybrid.distributed.shard_batch((x, y), trainer.mesh)   # split the batch over 'data'
    ... the usual record / backward / trainer.step(batch_size) loop ...

Parameters are replicated (or split by :class:`ShardingRules`), the batch is split, and
XLA's SPMD partitioner inserts the gradient all-reduce into the compiled programs.
"""
from ..nn.sync_batchnorm import SyncBatchNorm, axis_is_bound
from .launch import initialize, is_main_process, shutdown
from .mesh import DATA_AXIS, MODEL_AXIS, make_mesh
from .placement import Placement, ShardingRules, parameter_sharding, place_parameters, shard_batch

__all__ = ["make_mesh", "DATA_AXIS", "MODEL_AXIS", "ShardingRules", "Placement", "parameter_sharding",
           "place_parameters", "shard_batch", "SyncBatchNorm", "axis_is_bound", "initialize", "shutdown",
           "is_main_process"]
