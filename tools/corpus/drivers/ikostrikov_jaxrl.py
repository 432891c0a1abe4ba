"""ikostrikov's jaxrl (``jax_rl/``; jax-sac holds the same agents): every agent's networks are a
``Model`` dataclass whose ``with_optimizer(optim_def)`` creates the def the agent passes; AWAC's
actor def is ``Adam(**actor_optim_kwargs)``, its keywords whatever the learner's caller passes.

AWAC built by its own ``__init__`` with each of four actor key sets (the learner's default,
``{'learning_rate': 1e-3}``, ``{'learning_rate': 3e-4, 'beta1': 0.5, 'weight_decay': 1e-3}``,
``{'learning_rate': 3e-4, 'eps': 1e-4}``), then SAC and BC (4-dimensional observations,
2-dimensional actions, hidden layers of 16), each ``update``d STEPS times on one random batch
of 8 transitions. The trajectory: per update, every value of the agent's info dict (losses, the
temperature, entropies), then every parameter its models' optimizers hold. Two more key sets
legacy could not run add 1.0 each when they raise (an unknown key, ``momentum``; no learning
rate). The data is the only thing not the program's: no gym environment or d4rl data set runs.
Needs tensorflow_probability (``--site``).
"""
import _driver

program, steps = _driver.setup('gym', 'd4rl', 'gdown', 'imageio', 'dmc2gym')
import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402
import sys  # noqa: E402

# jaxrl's jax_rl/ is a namespace package (no __init__.py), which the module jax_rl.py beside
# this driver (henry-prior's) would hide: the program's own is bound first.
spec = importlib.machinery.PathFinder.find_spec('jax_rl', [str(program.parent), str(program)])
sys.modules['jax_rl'] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sys.modules['jax_rl'])
import numpy as np  # noqa: E402
from jax_rl.agents import AWACLearner, BCLearner, SACLearner  # noqa: E402
from jax_rl.datasets import Batch  # noqa: E402

OBS, ACT, N = 4, 2, 8
rng = np.random.RandomState(0)
observations = rng.randn(N, OBS).astype(np.float32)
actions = rng.uniform(-0.9, 0.9, (N, ACT)).astype(np.float32)
batch = Batch(observations=observations, actions=actions,
              rewards=rng.randn(N).astype(np.float32), masks=np.ones(N, np.float32),
              next_observations=rng.randn(N, OBS).astype(np.float32))
small = dict(actor_hidden_dims=(16, 16), critic_hidden_dims=(16, 16))
agents = [AWACLearner(0, observations[:1], actions[:1], **small)]
for kwargs in ({'learning_rate': 1e-3}, {'learning_rate': 3e-4, 'beta1': 0.5, 'weight_decay': 1e-3},
               {'learning_rate': 3e-4, 'eps': 1e-4}):
  agents.append(AWACLearner(0, observations[:1], actions[:1], actor_optim_kwargs=kwargs, **small))
agents.append(SACLearner(1, observations[:1], actions[:1], hidden_dims=(16, 16)))
agents.append(BCLearner(2, observations[:1], actions[:1], hidden_dims=(16, 16)))
losses, held = [], []
for agent in agents:
  for _ in range(steps):
    info = agent.update(batch)
    losses.extend(float(np.asarray(info[k])) for k in sorted(info))
for agent in agents:
  models = getattr(agent, 'models', None) or getattr(agent, 'sac', None)
  nets = [agent.actor] if models is None else [
      m for m in (models.actor, models.critic, models.temp) if m is not None]
  held.extend(_driver.params_of(m.optimizer) for m in nets)
for bad in ({'learning_rate': 3e-4, 'momentum': 0.9}, {'weight_decay': 1e-4}):
  try:
    AWACLearner(0, observations[:1], actions[:1], actor_optim_kwargs=bad, **small).update(batch)
    losses.append(0.0)
  except (TypeError, AssertionError):
    losses.append(1.0)
_driver.emit(losses, held)
