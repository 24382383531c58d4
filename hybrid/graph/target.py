"""The compilation target: the backend a graph is compiled for and the choices that depend on it.

A :class:`Target` is passed to the pipeline and from there to every pass, instead of passes reading
JAX's default backend themselves. It is printed with the pipeline's statistics.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import jax

__all__ = ["Target", "compiler_options"]


@dataclass(frozen=True)
class Target:
    """Backend choices of one compilation.

    - ``backend``: ``'cpu'``, ``'gpu'`` or ``'tpu'``.
    - ``skipped_passes``: passes of the default pipeline measured not to pay on this backend (on XLA:CPU,
      splitting the output of one wide matmul costs more than the launches ``horizontal_fusion`` saves).
    - ``depthwise_as_shifts``: depthwise convolutions run as sums of shifted products, fastest in their
      channels-first layout (XLA:CPU's grouped convolution is several times slower).
    - ``fused_attention``: attention runs as ``jax.nn.dot_product_attention`` (cuDNN's fused kernel on
      GPUs) rather than as two einsums around a softmax.
    - ``compiler_options``: XLA options every program hybrid compiles gets (:attr:`options`). On XLA:CPU
      the pass removing optimisation barriers is disabled, so that recomputation planned by
      rematerialisation (``jax.checkpoint``) is not merged back into the forward pass.

    The layer implementations ask the target of the backend they run on (:meth:`for_backend`).
    """

    backend: str
    skipped_passes: tuple[str, ...] = ()
    depthwise_as_shifts: bool = False
    fused_attention: bool = False
    compiler_options: tuple[tuple[str, str], ...] = ()

    @property
    def options(self) -> dict[str, str]:
        """:attr:`compiler_options` as the dict ``jax.jit(compiler_options=...)`` takes."""
        return dict(self.compiler_options)

    @classmethod
    def for_backend(cls, backend: str | None = None) -> "Target":
        """The target of ``backend`` (default: JAX's default backend)."""
        backend = backend or jax.default_backend()
        if backend == "cpu":
            return cls("cpu", skipped_passes=("horizontal_fusion",), depthwise_as_shifts=True,
                       compiler_options=(("xla_disable_hlo_passes", "cse_barrier_expander"),))
        return cls(backend, fused_attention=backend == "gpu")

    def __str__(self) -> str:
        skipped = ", ".join(self.skipped_passes) or "none"
        return (f"target {self.backend}: skipped passes {skipped}; depthwise convolutions as "
                f"{'shifted products' if self.depthwise_as_shifts else 'grouped convolutions'}")


def compiler_options(backend: str | None = None) -> dict[str, str]:
    """The XLA options of programs compiled for ``backend`` (default: JAX's default backend); pass
    them to ``jax.jit(..., compiler_options=...)`` of code that runs rematerialised hybrid blocks."""
    return _target(backend or jax.default_backend()).options


@functools.cache
def _target(backend: str) -> Target:
    return Target.for_backend(backend)
