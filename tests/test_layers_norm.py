"""Group and instance normalisation (hybrid/nn/norm_layers.py): forward against NumPy, hybridized
against eager (outputs and gradients), and gradients against finite differences of the NumPy reference."""
from hybrid import init, nn

import references_nn as refn
from helpers import LayerCase, layer_case_tests

NORMAL = dict(gamma_initializer=init.Normal(1.0), beta_initializer=init.Normal(1.0))

CASES = [
    LayerCase("groupnorm", lambda: nn.GroupNorm(2, **NORMAL), (2, 4, 3, 2),
              lambda a: refn.group_norm(a["x"], a["gamma"], a["beta"], 2, 1e-5)),
    LayerCase("groupnorm_1d_eps", lambda: nn.GroupNorm(3, epsilon=0.1, in_channels=6, **NORMAL), (2, 6, 4),
              lambda a: refn.group_norm(a["x"], a["gamma"], a["beta"], 3, 0.1)),
    LayerCase("instancenorm_scaled", lambda: nn.InstanceNorm(scale=True, **NORMAL), (2, 3, 4, 2),
              lambda a: refn.instance_norm(a["x"], a["gamma"], a["beta"], 1e-5)),
    LayerCase("instancenorm_channels_last", lambda: nn.InstanceNorm(axis=-1, beta_initializer=init.Normal(1.0)),
              (2, 5, 3), lambda a: refn.instance_norm(a["x"], a["gamma"], a["beta"], 1e-5, axis=-1)),
]
globals().update(layer_case_tests(CASES))
