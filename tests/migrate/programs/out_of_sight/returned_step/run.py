import jax.numpy as jnp
from flax import optim

from lib.training import train
from lib.utils import create_update


def loss_fn(params, state):
  return jnp.sum(params['w'] ** 2) * state


params = {'w': jnp.ones(3)}
state = 1.0
optimizer = optim.Adam(learning_rate=2e-3, beta1=0.99, beta2=0.99)
optimizer = optimizer.create(params)
update_fn = create_update(loss_fn)
optimizer, state = train(update_fn, optimizer, state, 5)
print(optimizer.target)
