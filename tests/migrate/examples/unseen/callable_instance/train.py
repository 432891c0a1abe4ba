"""modax (2021): an early-stopping scheduler is a dataclass instance called with the loss and
the optimizer; its ``__call__`` keeps the best optimizer in a field and returns a stop flag
and the optimizer to go on with. The call of the instance runs the class's own ``__call__``,
so the optimizer is followed into it and back. Before: refused FOM107, "the analysis does not
follow a call of an instance into its __call__"."""
import dataclasses
import json

import jax
import jax.numpy as jnp
from flax import optim


@dataclasses.dataclass
class EarlyStop:
  patience: int = 2
  best_loss: float = 1e9
  waited: int = 0
  best: object = None

  def __call__(self, loss, optimizer):
    if loss < self.best_loss:
      self.best_loss, self.waited, self.best = loss, 0, optimizer
    else:
      self.waited += 1
    return self.waited > self.patience, optimizer


def loss_fn(params):
  return jnp.sum((params['w'] - jnp.array([1.0, -2.0, 0.5])) ** 2)


@jax.jit
def step(optimizer):
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.target)
  return optimizer.apply_gradient(grad), loss


def main():
  optimizer = optim.Adam(learning_rate=0.3).create({'w': jnp.zeros(3)})
  check = EarlyStop(patience=2)
  out = []
  for _ in range(12):
    optimizer, loss = step(optimizer)
    stop, optimizer = check(float(loss), optimizer)
    out.append(float(loss))
    if stop:
      break
  out += [float(v) for v in check.best.target['w']] + [float(v) for v in optimizer.target['w']]
  print(json.dumps(out))


if __name__ == '__main__':
  main()
