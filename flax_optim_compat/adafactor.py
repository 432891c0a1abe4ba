"""Legacy ``flax.optim.adafactor``: Adafactor with factored float32 second-moment statistics."""
from typing import Any, Optional

import jax
import jax.numpy as jnp
import optax
from flax import struct

from . import _hyper
from ._adapter import OptaxBackedDef
from ._plain_optax import Attr, Hyper, PlainCall, PlainForm

__all__ = ['Adafactor']


@struct.dataclass
class _AdafactorHyperParams:
  learning_rate: jax.Array | float | None
  factored: bool
  multiply_by_parameter_scale: bool
  beta1: jax.Array | float | None
  decay_rate: jax.Array | float
  step_offset: jax.Array | int
  clipping_threshold: jax.Array | float | None
  weight_decay_rate: jax.Array | float | None
  min_dim_size_to_factor: int
  epsilon1: jax.Array | float
  epsilon2: jax.Array | float


@struct.dataclass
class _AdafactorParamState:
  v_row: jax.Array  # factored leaves: row statistics, else a (1,) placeholder
  v_col: jax.Array  # factored leaves: column statistics, else a (1,) placeholder
  v: jax.Array      # unfactored leaves: full second moment, else a (1,) placeholder
  m: jax.Array      # beta1 is not None: momentum (dtype_momentum), else a (1,) placeholder


def _placeholder() -> jax.Array:
  # Legacy's dummy value for unused slots: default float dtype (float64 under x64).
  return jnp.zeros((1,))


def in_float32(inner: optax.GradientTransformation) -> optax.GradientTransformation:
  """Runs ``inner`` on float32 copies of the updates and params.

  Legacy Adafactor casts every gradient to float32 and keeps its second-moment statistics in
  float32 whatever the parameter dtype; ``optax.scale_by_factored_rms`` computes and stores
  them in the parameter dtype. Wrapping it gives the legacy dtypes for bfloat16, float64 and
  integer parameters (a no-op for float32 ones).

  Args:
    inner: the transformation to run in float32.

  Returns:
    An ``optax.GradientTransformation`` with ``inner``'s state.

  Examples:
    >>> import jax.numpy as jnp
    >>> import optax
    >>> tx = in_float32(optax.scale_by_factored_rms())
    >>> params = {'w': jnp.ones(3, jnp.bfloat16)}
    >>> tx.init(params).v['w'].dtype
    dtype('float32')
  """
  to_f32 = lambda tree: jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float32), tree)

  def init_fn(params):
    return inner.init(to_f32(params))

  def update_fn(updates, state, params=None):
    return inner.update(to_f32(updates), state, None if params is None else to_f32(params))

  return optax.GradientTransformation(init_fn, update_fn)


def adafactor_transform(hyper_params: _AdafactorHyperParams,
                        dtype_momentum: Any = jnp.float32) -> optax.GradientTransformation:
  """The legacy update as an optax chain (= ``optax.adafactor`` with ``epsilon2`` exposed).

  ``scale_by_factored_rms -> clip_by_block_rms -> *lr -> scale_by_param_block_rms -> ema ->
  add_decayed_weights -> *-1``. Legacy computes ``(lr * max(rms(p), eps2)) * y`` where optax
  computes ``(y * lr) * max(rms(p), eps2)``, and ``(1 - w) * p - u`` where optax computes
  ``p - (u + w * p)``: the same terms associated differently (float32 rounding only). The
  weight decay is not scaled by the learning rate, as legacy.
  """
  hp = hyper_params
  parts = [in_float32(optax.scale_by_factored_rms(
      factored=hp.factored, decay_rate=hp.decay_rate, step_offset=hp.step_offset,
      min_dim_size_to_factor=hp.min_dim_size_to_factor, epsilon=hp.epsilon1))]
  if hp.clipping_threshold is not None:
    parts.append(optax.clip_by_block_rms(hp.clipping_threshold))
  parts.append(_hyper.scale_by_required_learning_rate(hp.learning_rate, flip_sign=False))
  if hp.multiply_by_parameter_scale:
    parts.append(optax.scale_by_param_block_rms(hp.epsilon2))
  if hp.beta1 is not None:
    parts.append(optax.ema(hp.beta1, debias=False, accumulator_dtype=dtype_momentum))
  if hp.weight_decay_rate is not None:
    parts.append(optax.add_decayed_weights(hp.weight_decay_rate))
  parts.append(optax.scale(-1.0))
  return optax.chain(*parts)


class Adafactor(OptaxBackedDef):
  """Adafactor (Shazeer & Stern, 2018): factored second moments, relative step sizes.

  A leaf is factored when ``factored`` and its two largest dimensions are both at least
  ``min_dim_size_to_factor``: it then keeps row and column statistics (``v_row``, ``v_col``)
  instead of a full second moment ``v``. Unused state slots hold a ``(1,)`` placeholder.

  Args:
    learning_rate: the step size (``None``: pass ``learning_rate=`` every step).
    factored: factor the second moment of leaves with two large dimensions.
    multiply_by_parameter_scale: scale the step by ``max(rms(param), epsilon2)``.
    beta1: momentum coefficient (``None``: no momentum, and no momentum memory).
    decay_rate: exponent of the second-moment decay ``1 - (step + 1) ** -decay_rate``.
    step_offset: subtracted from the step in that schedule (fine-tuning).
    clipping_threshold: clip the update's rms to this value (``None``: no clipping).
    weight_decay_rate: ``p' = (1 - weight_decay_rate) * p - update`` (not scaled by the
      learning rate); ``None`` for no decay.
    min_dim_size_to_factor: the smallest dimension size for factoring.
    epsilon1: added to the squared gradient.
    epsilon2: lower bound of the parameter scale.
    dtype_momentum: dtype of the momentum ``m`` (an attribute, not a hyper-param).

  ``factored``, ``min_dim_size_to_factor`` and ``multiply_by_parameter_scale`` are always
  read from the constructor; per-call overrides of them are ignored, as in legacy.

  Examples:
    >>> import jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> params = {'kernel': jnp.ones((3, 2)), 'bias': jnp.ones(2)}
    >>> optimizer = optim.Adafactor(learning_rate=0.1, min_dim_size_to_factor=2).create(params)
    >>> state = optimizer.state.param_states['kernel']
    >>> state.v_row.shape, state.v_col.shape, state.v.shape, state.m.shape
    ((2,), (3,), (1,), (1,))
    >>> grads = {'kernel': jnp.ones((3, 2)), 'bias': jnp.ones(2)}
    >>> optimizer.apply_gradient(grads).target['kernel']  # 1 - 0.1 * rms(1) * 1
    Array([[0.9, 0.9],
           [0.9, 0.9],
           [0.9, 0.9]], dtype=float32)

  Differences from flax.optim:
    under ``jax_enable_x64`` the ``v_row``/``v_col``/``v`` placeholders are float32 (legacy:
    float64, the default float dtype); the real statistics are float32 on both sides. Built
    with ``beta1=None`` and given ``beta1=...`` as an override, legacy broadcast the ``(1,)``
    placeholder ``m`` and so turned a 0-d parameter into shape ``(1,)``; it keeps shape ``()``.

  References:
    Shazeer & Stern, `Adafactor: Adaptive Learning Rates with Sublinear Memory Cost
    <https://arxiv.org/abs/1804.04235>`_, 2018
  """
  param_state_cls = _AdafactorParamState
  optax_state_fields = {'v_row': 'v_row', 'v_col': 'v_col', 'v': 'v', 'm': 'ema'}
  legacy_placeholders = {'m': _placeholder}
  constructor_only_hyper_params = frozenset(
      {'factored', 'min_dim_size_to_factor', 'multiply_by_parameter_scale'})
  keep_param_dtype = True  # legacy: `new_param.astype(param.dtype)`, integers truncated
  plain_optax_forms = (
      # optax.adafactor fixes the parameter-scale floor (legacy epsilon2) at 1e-3.
      PlainForm((PlainCall('adafactor', (
          ('learning_rate', Hyper('learning_rate')),
          ('min_dim_size_to_factor', Hyper('min_dim_size_to_factor')),
          ('decay_rate', Hyper('decay_rate')), ('decay_offset', Hyper('step_offset')),
          ('multiply_by_parameter_scale', Hyper('multiply_by_parameter_scale')),
          ('clipping_threshold', Hyper('clipping_threshold')), ('momentum', Hyper('beta1')),
          ('dtype_momentum', Attr('dtype_momentum', 'float32')),
          ('weight_decay_rate', Hyper('weight_decay_rate')), ('eps', Hyper('epsilon1')),
          ('factored', Hyper('factored')))),),
                when=(('epsilon2', 1e-3),)),
      PlainForm((
          PlainCall('scale_by_factored_rms', (
              ('factored', Hyper('factored')), ('decay_rate', Hyper('decay_rate')),
              ('step_offset', Hyper('step_offset')),
              ('min_dim_size_to_factor', Hyper('min_dim_size_to_factor')),
              ('epsilon', Hyper('epsilon1')))),
          PlainCall('clip_by_block_rms', (('threshold', Hyper('clipping_threshold')),),
                    unless=(('clipping_threshold', None),)),
          PlainCall('scale_by_learning_rate', (('learning_rate', Hyper('learning_rate')),
                                               ('flip_sign', False))),
          PlainCall('scale_by_param_block_rms', (('min_scale', Hyper('epsilon2')),),
                    unless=(('multiply_by_parameter_scale', False),)),
          PlainCall('ema', (('decay', Hyper('beta1')), ('debias', False),
                            ('accumulator_dtype', Attr('dtype_momentum', ''))),
                    unless=(('beta1', None),)),
          PlainCall('add_decayed_weights', (('weight_decay', Hyper('weight_decay_rate')),),
                    unless=(('weight_decay_rate', None),)),
          PlainCall('scale', (('step_size', -1.0),)))),
  )

  def __init__(self,
               learning_rate: Optional[float] = None,
               factored: bool = True,
               multiply_by_parameter_scale: bool = True,
               beta1: Optional[float] = None,
               decay_rate: float = 0.8,
               step_offset: int = 0,
               clipping_threshold: Optional[float] = 1.0,
               weight_decay_rate: Optional[float] = None,
               min_dim_size_to_factor: int = 128,
               epsilon1: float = 1e-30,
               epsilon2: float = 1e-3,
               dtype_momentum: Any = jnp.float32):
    hyper_params = _AdafactorHyperParams(
        learning_rate, factored, multiply_by_parameter_scale, beta1, decay_rate, step_offset,
        clipping_threshold, weight_decay_rate, min_dim_size_to_factor, epsilon1, epsilon2)
    self.dtype_momentum = jax.dtypes.canonicalize_dtype(dtype_momentum)
    super().__init__(hyper_params)

  def build_transform(self, hyper_params) -> optax.GradientTransformation:
    """The optax chain for ``hyper_params`` (with this def's momentum dtype)."""
    return adafactor_transform(hyper_params, self.dtype_momentum)
