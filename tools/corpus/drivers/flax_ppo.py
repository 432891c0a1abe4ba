"""flax's examples/ppo of v0.3.x (flax.optim: `models.create_optimizer` returns
`optim.Adam(learning_rate).create(params)`; the jitted `ppo_lib.train_step` runs an epoch of
minibatches, each `optimizer.apply_gradient(grad, learning_rate=lr)` with the decaying `lr` the
caller passes, a traced argument).

Built as `ppo_main.main` builds it: `models.ActorCritic(num_outputs=4)`,
`models.get_initial_params`, `models.create_optimizer(params, 2.5e-4)`. Then the core of
`ppo_lib.train`'s loop for `steps` loop steps out of `steps` (alpha = 1 - s/steps: the learning
rate and the clip parameter decay as with `decaying_lr_and_clip_param`): experience of 2 agents
over 4 actor steps, made as `get_experience` makes it (random 84x84x4 frames, the program's
`agent.policy_action` for values and log-probabilities, an action drawn from its
probabilities with a seeded RandomState, random rewards and dones) without the gym simulators,
`process_experience` (GAE), then 2 epochs of a permutation and `train_step` with minibatches of 4.
At the end the optimizer is saved with the program's `checkpoints.save_checkpoint` (as `train`
does), which must write the legacy format (one msgpack file `checkpoint_<step>`). Emitted: the
loss of every `train_step`, then the final params.
"""
import os
import tempfile

import _driver

program, steps = _driver.setup('tensorflow', 'tensorboard', 'gym', 'cv2', 'clu')
import flax.io  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

_driver.plain_flax_io()   # checkpoints on the real file system, not the tensorflow stand-in

import agent  # noqa: E402
import models  # noqa: E402
import ppo_lib  # noqa: E402

NUM_AGENTS, ACTOR_STEPS, BATCH, EPOCHS = 2, 4, 4, 2
LR, CLIP, VF, ENT, GAMMA, LAMBDA = 2.5e-4, 0.1, 0.5, 0.01, 0.99, 0.95

module = models.ActorCritic(num_outputs=4)
key = jax.random.PRNGKey(0)
key, subkey = jax.random.split(key)
initial_params = models.get_initial_params(subkey, module)
optimizer = models.create_optimizer(initial_params, LR)

data = np.random.RandomState(0)
losses = []
for s in range(steps):
  alpha = 1. - s / steps
  experience = []
  for _ in range(ACTOR_STEPS + 1):
    states = data.rand(NUM_AGENTS, 84, 84, 4).astype(np.float32)
    log_probs, values = jax.device_get(
        agent.policy_action(_driver.params_of(optimizer), module, states))
    probs = np.exp(np.array(log_probs, np.float64))
    row = []
    for i in range(NUM_AGENTS):
      action = data.choice(probs.shape[1], p=probs[i] / probs[i].sum())
      row.append(agent.ExpTuple(states[i], action, float(data.randn()), values[i, 0],
                                log_probs[i][action], bool(data.rand() < 0.2)))
    experience.append(row)
  trajectories = ppo_lib.process_experience(experience, ACTOR_STEPS, NUM_AGENTS, GAMMA, LAMBDA)
  lr = LR * alpha
  clip_param = CLIP * alpha
  for e in range(EPOCHS):
    permutation = data.permutation(NUM_AGENTS * ACTOR_STEPS)
    trajectories = tuple(map(lambda x: x[permutation], trajectories))
    optimizer, loss = ppo_lib.train_step(module, optimizer, trajectories, clip_param, VF, ENT,
                                         lr, BATCH)
    losses.append(loss)

model_dir = tempfile.mkdtemp(prefix='flax_ppo_')
ppo_lib.checkpoints.save_checkpoint(model_dir, optimizer, steps)
files = sorted(os.listdir(model_dir))
assert files == [f'checkpoint_{steps}'] and os.path.isfile(os.path.join(model_dir, files[0])), (
    f'not the legacy msgpack checkpoint: {files}')
_driver.emit(losses, _driver.params_of(optimizer))
