"""The runner's step count: it imports neither jax nor flax, and reads only the state's step."""


def steps_taken(agent):
  return int(agent.optimizer.state.step)
