"""A pickle of jax arrays written by jax 0.4.13 (flax 0.5.3's era), and the values it holds.

Run in the legacy oracle venv, from the repository root::

    ~/.cache/legacy-flax-oracle/bin/python -m tools.oracle.gen_legacy_pickle

jax 0.4.x pickles an array as ``jax._src.array._reconstruct_array(fun, args, arr_state,
aval_state)`` with ``aval_state = {'weak_type': ..., 'named_shape': {}}``; today's
``ShapedArray`` has no ``named_shape``, so today's jax alone fails on it. Writes
tests/fixtures/legacy_names/jax_0_4_13_arrays.pkl (a dict of arrays: float32, int32 scalar,
a weakly typed float, bfloat16, a 2-d int8 array, and a numpy array beside them)
and jax_0_4_13_arrays.json (each entry's dtype, shape, weak type and values as printed here).
"""
import json
import os
import pickle

import jax
import jax.numpy as jnp
import numpy as np

from tools import oracle

OUT = os.path.join(oracle.FIXTURES, 'legacy_names', 'jax_0_4_13_arrays')


def main():
  arrays = {
      'params': jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3) / 4,
      'step': jnp.asarray(7, jnp.int32),
      'weak': jnp.asarray(0.5) * 3,  # a Python scalar times an array: weakly typed
      'bf16': jnp.asarray([1.5, -2.25], jnp.bfloat16),
      'mask': jnp.asarray([[1, -1], [0, 3]], jnp.int8),
      'numpy': np.asarray([1.0, 2.0]),
  }
  with open(OUT + '.pkl', 'wb') as f:
    pickle.dump(arrays, f, protocol=4)
  expected = {'jax': jax.__version__}
  for key, value in arrays.items():
    expected[key] = {'type': 'numpy' if isinstance(value, np.ndarray) else 'jax',
                     'dtype': str(value.dtype), 'shape': list(value.shape),
                     'weak_type': bool(getattr(getattr(value, 'aval', None), 'weak_type', False)),
                     'values': np.asarray(value, np.float64).tolist()}
  with open(OUT + '.json', 'w', encoding='utf-8') as f:
    json.dump(expected, f, indent=1, sort_keys=True)
    f.write('\n')
  print(f'wrote {OUT}.pkl and .json (jax {jax.__version__})')


if __name__ == '__main__':
  main()
