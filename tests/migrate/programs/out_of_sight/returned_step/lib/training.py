def train(update_fn, optimizer, state, n):
  for _ in range(n):
    (optimizer, state), metrics = update_fn(optimizer, state)
  return optimizer, state
