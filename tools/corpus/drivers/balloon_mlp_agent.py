"""google/balloon-learning-environment's `MLPAgent` (`agents/mlp_agent.py`: a gin-configurable
`create_optimizer()` returns `optim.GradientDescent(learning_rate=...)`, `MLPAgent.__init__`
creates it over a Linen `MLPNetwork`'s variables into `self.optimizer`, and `step()` runs the
jitted SARSA update `train(network_def, optimizer, ...)` (`optimizer.apply_gradient(grad)`) and
keeps the optimizer it returns).

The agent is built and stepped through its own methods (`begin_episode`, then `step` per
reward), as the environment's runner does, on random 5-feature observations and rewards; the
module's `train` is wrapped only to record the loss it returns (it is logged, not kept).
gin binds `MLPNetwork`'s two required fields and the learning rate. The environment's own
libraries the package imports at its top (gym, s2sphere, opensimplex, transitions, sklearn,
tensorflow_probability) and dopamine (only its Atari network is imported by `networks.py`) are
stand-ins. Needs gin (`--site`).
"""
import _driver

program, steps = _driver.setup('tensorflow', 'tensorboard', 'gym', 'dopamine', 's2sphere',
                               'opensimplex', 'transitions', 'sklearn',
                               'tensorflow_probability', 'matplotlib')
import gin  # noqa: E402
import numpy as np  # noqa: E402
from balloon_learning_environment.agents import mlp_agent  # noqa: E402

gin.parse_config(['MLPNetwork.num_layers = 3', 'MLPNetwork.hidden_units = 16',
                  'create_optimizer.learning_rate = 0.05'])

losses = []
train = mlp_agent.train


def recorded_train(*args):
  loss, optimizer = train(*args)
  losses.append(loss)
  return loss, optimizer


mlp_agent.train = recorded_train
agent = mlp_agent.MLPAgent(num_actions=3, observation_shape=(5,), gamma=0.9, seed=0)
data = np.random.RandomState(0)
agent.begin_episode(data.rand(5).astype(np.float32))
for _ in range(steps):
  agent.step(float(data.rand()), data.rand(5).astype(np.float32))
_driver.emit(losses, agent.network)
