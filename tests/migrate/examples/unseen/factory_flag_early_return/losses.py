"""mle_score_ode (2021, a score_flow fork): ``optimization_manager(joint=False)`` returns its
joint step under ``if joint:`` and its plain step after that ``if``; the trainer binds what it
returns in each branch of its own ``if``, then calls it there. The steps read the optimizers
as fields of a ``flax.struct.dataclass`` state."""
import flax


def get_optimizer(lr):
  return flax.optim.Adam(learning_rate=lr)


def optimization_manager(joint=False):
  def optimize_fn(state, grad):
    return state.optimizer.apply_gradient(grad, learning_rate=state.lr)

  def optimize_joint_fn(state, grad):
    return (state.a_optimizer.apply_gradient(grad['a'], learning_rate=state.lr),
            state.b_optimizer.apply_gradient(grad['b'], learning_rate=state.lr * 0.5))

  if joint:
    return optimize_joint_fn
  return optimize_fn
