"""Runs the JAX agent and logs its weights. It imports neither jax nor flax: it is handed the
agent, and reads its optimizer's target as any value's attribute."""
import json

import numpy as np

import jax_agent
import log


def weights(agent):
  return [float(x) for x in np.asarray(agent.optimizer.target['w'])]


def main():
  agent = jax_agent.JaxAgent({'w': np.ones(3, np.float32)}, learning_rate=0.02)
  losses = [float(agent.update(np.arange(3.0, dtype=np.float32) / 3.0)) for _ in range(5)]
  print(json.dumps(losses + weights(agent) + [log.steps_taken(agent)]))


if __name__ == '__main__':
  main()
