import importlib
import sys

import jax.numpy as jnp


def main(module_path):
  submission = importlib.import_module(module_path)
  init_optimizer_state = submission.init_optimizer_state
  update_params = submission.update_params
  state = init_optimizer_state({'w': jnp.ones(3)})
  for _ in range(3):
    state, params = update_params(state, jnp.arange(3.0))
  print(params)


if __name__ == '__main__':
  main(sys.argv[1] if len(sys.argv) > 1 else 'submission')
