"""henry-prior's jax-rl (agents as classes whose `__init__` creates `optim.Adam(lr).create(...)` per
network: TD3 an actor and a critic, SAC also a temperature; each agent's `train` steps them
through module-level jitted functions that call `apply_gradient`: the critic every step, the
actor (and SAC's temperature) every second step).

For TD3 and SAC: the agent built by its own `__init__` (3-dimensional states, 2-dimensional
actions), a `buffers.ReplayBuffer` of 64 random transitions, `agent.train` called STEPS times
(batch 16). The trajectory: per step, each agent's action for a fixed state (`select_action`);
then every attribute of each agent that holds an optimizer or target parameters. The data is the
only thing not the program's: no gym or dm_control environment runs. MPO is left out: its E-step
hands float32 values to scipy's SLSQP, which today's scipy refuses (on both sides alike). Needs
haiku (`--site`).
"""
import _driver

program, steps = _driver.setup('tensorflow', 'gym', 'dm_control')
import numpy as np  # noqa: E402
from jax_rl import SAC, TD3, buffers  # noqa: E402

STATE, ACTION = 3, 2
rng = np.random.RandomState(0)
buffer = buffers.ReplayBuffer(STATE, ACTION, max_size=64)
for _ in range(64):
  buffer.add(rng.randn(STATE), rng.uniform(-1, 1, ACTION), rng.randn(STATE), rng.randn(),
             float(rng.rand() < 0.1))
probe = rng.randn(STATE).astype(np.float32)
agents = [TD3.TD3(STATE, ACTION, 1.0), SAC.SAC(STATE, ACTION, 1.0)]
actions = []
for _ in range(steps):
  for agent in agents:
    agent.train(buffer, 16)
    actions.extend(np.asarray(agent.select_action(probe)).ravel())
held = []
for agent in agents:
  for name in sorted(vars(agent)):
    value = getattr(agent, name)
    if name.endswith('_optimizer'):
      held.append(_driver.params_of(value))
    elif name.endswith('target_params'):
      held.append(value)
_driver.emit(actions, held)
