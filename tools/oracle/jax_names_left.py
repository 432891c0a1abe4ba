"""Why migrate leaves ``xla_computation`` FLOP counts and ``host_callback`` taps (FOM299).

Run it under jax 0.4.13 (the oracle venv) and under today's jax (the dev venv) and compare:

    /root/.cache/legacy-flax-oracle/bin/python tools/oracle/jax_names_left.py
    .venv/bin/python tools/oracle/jax_names_left.py

1. FLOPs: jax 0.4.13's ``hlo_module_cost_analysis`` of ``xla_computation(f)(x)`` against
   today's ``jax.jit(f).lower(x).cost_analysis()``, per function. The count is of the HLO each
   jax emits for the same function, so a function whose lowering changed counts differently.
2. Taps: what ``host_callback.id_tap`` hands its tap under ``vmap`` and ``grad`` on jax 0.4.13,
   against ``jax.debug.callback`` today, and how ``id_print`` / ``jax.debug.print`` print.
"""
import jax
import jax.numpy as jnp

OLD = jax.__version__ == '0.4.13'


def flops():
  x = jnp.linspace(0., 1., 4 * 64 * 16).reshape(4, 64, 16)
  w = jnp.linspace(-1., 1., 16 * 32).reshape(16, 32)
  cases = {
      'gelu': lambda x: jax.nn.gelu(x @ w),
      'log_softmax': lambda x: jax.nn.log_softmax(x @ w),
      'layernorm': lambda x: (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(
          x.var(-1, keepdims=True) + 1e-6),
      'attention': lambda x: jax.nn.softmax(jnp.einsum('bqd,bkd->bqk', x, x)) @ x,
      'conv': lambda x: jax.lax.conv_general_dilated(
          x[..., None], jnp.ones((3, 3, 1, 4)), (1, 1), 'SAME',
          dimension_numbers=('NHWC', 'HWIO', 'NHWC')),
      'mean': lambda x: jnp.mean(x, axis=1),
  }
  for name, f in cases.items():
    if OLD:
      module = jax.xla_computation(f)(x).as_hlo_module()
      analysis = jax.lib.xla_client._xla.hlo_module_cost_analysis(   # pylint: disable=protected-access
          jax.lib.xla_bridge.get_backend(), module)
    else:
      analysis = jax.jit(f).lower(x).cost_analysis()
    print(f'flops {name} {analysis["flops"]!r}')


def taps():
  calls = []
  if OLD:
    from jax.experimental import host_callback as hcb  # pylint: disable=g-import-not-at-top
    f = lambda x: hcb.id_tap(lambda v, transforms: calls.append((v.shape, transforms)), x) * 2.
    barrier = hcb.barrier_wait
  else:
    def f(x):
      jax.debug.callback(lambda v: calls.append((v.shape,)), x)
      return x * 2.
    barrier = jax.effects_barrier
  jax.vmap(f)(jnp.ones((3, 2)))
  jax.grad(lambda x: f(x).sum())(jnp.ones(2))
  barrier()
  print('tap calls', calls)
  if OLD:
    hcb.id_print(jnp.arange(3.), what='x')
  else:
    jax.debug.print('x: {}', jnp.arange(3.))
  barrier()


if __name__ == '__main__':
  print('jax', jax.__version__)
  flops()
  taps()
