"""0xWOLAND's td3-jax (TD3, twin delayed DDPG, Linen actor and twin critic): the program's own
``TD3.TD3`` agent, built as ``main.py`` builds it (its ``__init__``: the two models'
``init``, ``optim.Adam(learning_rate=3e-4).create(...)`` for the actor and for the critic), and
STEPS calls of its ``train(replay_buffer, batch_size)``: the critic step every call (target
policy smoothing with clipped noise, the twin-Q target, ``critic_optimizer.apply_gradient``),
and every second call (``policy_freq`` 2) the actor step and the Polyak update of both target
networks (``jax.tree_multimap``, migrated ``jax.tree_util.tree_map``).

Two agents, one after the other: ``jit=True`` (``main.py``'s default: the program wraps its
``_critic_step``, ``_actor_step`` and ``_update_target_params`` in ``jax.jit``) and
``jit=False`` (the same methods run eagerly, op by op).

Synthetic data: the program's own ``utils.ReplayBuffer`` (``max_size`` 64) filled with 64
random transitions (state dimension 3, action dimension 1, ``max_action`` 2, rewards and done
flags, seed 0); ``train`` samples batches of 16 from it with the global ``np.random``, seeded
with 0 before each agent, as ``main.py`` seeds it. ``policy_noise`` 0.2 and ``noise_clip`` 0.5
times ``max_action``, ``discount`` 0.99, ``tau`` 0.005: ``main.py``'s values.

The trajectory, per agent: after every ``train`` call the agent's ``select_action`` (the
program's method) on four fixed states; then the final actor and critic parameters (the
optimizers' ``target``, migrated ``params``) and both target networks. Stand-ins: none (gym is
only imported by ``main.py``, which the driver does not import).
"""
import _driver

program, steps = _driver.setup()
import numpy as np  # noqa: E402

import TD3  # noqa: E402
import utils  # noqa: E402

STATE, ACTION, MAX_ACTION, BUFFER, BATCH = 3, 1, 2.0, 64, 16


def run(jit, values, held):
  data = np.random.RandomState(0)
  buffer = utils.ReplayBuffer(STATE, ACTION, max_size=BUFFER)
  for _ in range(BUFFER):
    buffer.add(data.normal(size=STATE), data.uniform(-MAX_ACTION, MAX_ACTION, ACTION),
               data.normal(size=STATE), data.normal(), float(data.uniform() < 0.1))
  probe = data.normal(size=(4, STATE)).astype(np.float32)
  policy = TD3.TD3(state_dim=STATE, action_dim=ACTION, max_action=MAX_ACTION, discount=0.99,
                   tau=0.005, policy_noise=0.2 * MAX_ACTION, noise_clip=0.5 * MAX_ACTION,
                   policy_freq=2, seed=0, jit=jit)
  np.random.seed(0)
  for _ in range(steps):
    policy.train(buffer, BATCH)
    values.extend(float(a) for state in probe for a in policy.select_action(state))
  held.extend([_driver.params_of(policy.actor_optimizer),
               _driver.params_of(policy.critic_optimizer),
               policy.actor_target_params, policy.critic_target_params])


values, held = [], []
for use_jit in (True, False):
  run(use_jit, values, held)
_driver.emit(values, held)
