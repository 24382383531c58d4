"""benchmarks/bench_cpu_flags.py reads optimised HLO: which library runs each convolution and matrix product,
and whether two runs generated the same code. Checked on a hand-written module (expected kinds worked out by
hand) and on a convolution compiled by this jaxlib."""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from benchmarks.bench_cpu_flags import _entry_kinds, _normalised, classify, max_rel_diff

MODULE = """HloModule jit_f, entry_computation_layout={(f32[1,4,4,2]{3,2,1,0}, f32[3,3,2,2]{3,2,1,0})->f32[1,4,4,2]{3,2,1,0}}

FileNames
1 "/somewhere/f.py"

%fused_computation (param_0: f32[1,4,4,2], param_1: f32[3,3,2,2]) -> f32[1,4,4,2] {
  %param_0 = f32[1,4,4,2]{3,2,1,0} parameter(0)
  %param_1 = f32[3,3,2,2]{3,2,1,0} parameter(1)
  ROOT %conv.1 = f32[1,4,4,2]{3,2,1,0} convolution(%param_0, %param_1), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}

%fused_computation.1 (param_0.1: f32[1,4,4,2]) -> f32[1,4,4,2] {
  %param_0.1 = f32[1,4,4,2]{3,2,1,0} parameter(0)
  %constant.1 = f32[] constant(0)
  %broadcast.1 = f32[1,4,4,2]{3,2,1,0} broadcast(%constant.1), dimensions={}
  ROOT %maximum.1 = f32[1,4,4,2]{3,2,1,0} maximum(%param_0.1, %broadcast.1)
}

%fused_computation.2 (param_0.2: f32[1,4,4,2]) -> f32[2,4,4,1] {
  %param_0.2 = f32[1,4,4,2]{3,2,1,0} parameter(0)
  ROOT %transpose.1 = f32[2,4,4,1]{3,2,1,0} transpose(%param_0.2), dimensions={3,1,2,0}
}

ENTRY %main.9 (x: f32[1,4,4,2], w: f32[3,3,2,2]) -> f32[1,4,4,2] {
  %x = f32[1,4,4,2]{3,2,1,0} parameter(0), metadata={op_name="x"}
  %w = f32[3,3,2,2]{3,2,1,0} parameter(1)
  %ynn_fusion = f32[1,4,4,2]{3,2,1,0} fusion(%x, %w), kind=kCustom, calls=%fused_computation, backend_config={"fusion_config":{"kind":"__ynn_fusion"}}
  %convolution.2 = f32[1,4,4,2]{3,2,1,0} convolution(%x, %w), window={size=3x3 pad=1_2x1_2 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f
  %transpose_fusion = f32[2,4,4,1]{3,2,1,0} fusion(%convolution.2), kind=kLoop, calls=%fused_computation.2
  ROOT %relu_fusion = f32[1,4,4,2]{3,2,1,0} fusion(%ynn_fusion), kind=kLoop, calls=%fused_computation.1
}
"""


def test_classify_names_what_each_instruction_computes_and_which_library_runs_it():
    kinds = classify(MODULE)
    assert kinds["ynn_fusion"] == ("conv ynn", 1)
    assert kinds["convolution.2"] == ("conv xla", 1)
    assert kinds["relu_fusion"] == ("elementwise xla", 0)
    assert kinds["transpose_fusion"] == ("copy xla", 0)
    # only what runs counts: the convolution inside the YNNPACK fusion is not counted again
    assert _entry_kinds(MODULE) == {"conv ynn": 1, "conv xla": 1}


def test_normalised_code_ignores_module_name_metadata_and_source_tables():
    renamed = MODULE.replace("HloModule jit_f", "HloModule jit_g").replace('/somewhere/f.py', '/elsewhere/g.py')
    renamed = renamed.replace(', metadata={op_name="x"}', ', metadata={op_name="y"}')
    assert _normalised(renamed) == _normalised(MODULE)
    assert _normalised(MODULE.replace("__ynn_fusion", "__onednn_fusion")) != _normalised(MODULE)


def test_a_compiled_convolution_is_found_once():
    def f(x, w):
        return jax.nn.relu(lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))

    text = jax.jit(f).lower(jnp.ones((2, 8, 8, 4)), jnp.ones((3, 3, 4, 4))).compile().as_text()
    counts = _entry_kinds(text)
    assert sum(n for kind, n in counts.items() if kind.startswith("conv ")) == 1, counts


def test_max_rel_diff_is_relative_to_the_largest_reference_value():
    ref = np.array([10.0, -20.0, 0.0])
    assert max_rel_diff(ref + np.array([0.0, 0.0, 2e-3]), ref) == 1e-4
    assert max_rel_diff(ref, ref) == 0.0
