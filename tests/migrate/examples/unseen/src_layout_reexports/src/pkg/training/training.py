def train(update_fn, optimizer, epochs):
  losses = []
  for _ in range(epochs):
    optimizer, loss = update_fn(optimizer)
    losses.append(float(loss))
  return optimizer, losses
