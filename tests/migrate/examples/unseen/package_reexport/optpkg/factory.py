from flax import optim


def make_optimizer(params, learning_rate):
  return optim.Momentum(learning_rate=learning_rate, beta=0.8, nesterov=True).create(params)
