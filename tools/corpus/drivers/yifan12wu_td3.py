"""yifan12wu's td3-jax (``TD3.py``: ``TD3.__init__`` creates ``optim.Adam(learning_rate=3e-4)``
for the actor and the critic; ``_critic_step`` / ``_actor_step`` call ``apply_gradient``,
jitted or not as ``main.py``'s ``--jit`` says; ``train`` steps the critic every call, the actor and
the Polyak-averaged targets every ``policy_freq``-th).

For ``jit=True`` (``main.py``'s default) and ``jit=False``: the agent built by its own
``__init__`` (4-dimensional states, 2-dimensional actions, its own 256-unit layers), the
program's ``utils.ReplayBuffer`` (``max_size=64``) holding 64 random transitions, ``train`` called
STEPS times (batch 16, ``np.random.seed(0)`` before, as ``main.py`` seeds the sampling). The
program's ``train`` drops its losses, so the agent's own ``critic_step`` / ``actor_step`` are
wrapped to record what they return (the wrapper calls them unchanged). The trajectory: every
critic and actor loss, then the actor, critic and both target parameters. The data is the only
thing not the program's: no gym environment runs (``gym`` is a stand-in, used by ``main.py``
only).
"""
import _driver

program, steps = _driver.setup('gym', 'matplotlib', 'seaborn')
import numpy as np  # noqa: E402
import TD3  # noqa: E402
import utils  # noqa: E402

STATE, ACTION = 4, 2
rng = np.random.RandomState(0)
buffer = utils.ReplayBuffer(STATE, ACTION, max_size=64)
for _ in range(64):
  buffer.add(rng.randn(STATE), rng.uniform(-1, 1, ACTION), rng.randn(STATE), rng.randn(),
             float(rng.rand() < 0.1))

losses, held = [], []


def recording(step):
  def wrapped(*args):
    optimizer, loss = step(*args)
    losses.append(loss)
    return optimizer, loss
  return wrapped


for jit in (True, False):
  np.random.seed(0)
  agent = TD3.TD3(STATE, ACTION, 1.0, seed=0, jit=jit)
  agent.critic_step = recording(agent.critic_step)
  agent.actor_step = recording(agent.actor_step)
  for _ in range(steps):
    agent.train(buffer, 16)
  held.extend([_driver.params_of(agent.actor_optimizer), _driver.params_of(agent.critic_optimizer),
               agent.actor_target_params, agent.critic_target_params])
_driver.emit(losses, held)
