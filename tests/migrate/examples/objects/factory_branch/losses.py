"""score_flow's optimizer step: ``optimization_manager`` returns one of two nested functions,
chosen by its parameter ``deq_score_joint`` (default False, which no caller passes)."""
import jax
import jax.numpy as jnp


def optimization_manager(config, deq_score_joint=False):
  def optimize_fn(state, grad, warmup=config['warmup'], grad_clip=config['grad_clip']):
    lr = state.lr
    if warmup > 0:
      lr = lr * jnp.minimum(state.step / warmup, 1.0)
    grad_norm = jnp.sqrt(sum([jnp.sum(jnp.square(x)) for x in jax.tree_util.tree_leaves(grad)]))
    clipped_grad = jax.tree_util.tree_map(
        lambda x: x * grad_clip / jnp.maximum(grad_norm, grad_clip), grad)
    return state.optimizer.apply_gradient(clipped_grad, learning_rate=lr)

  def optimize_joint_fn(state, grad):
    return (state.deq_optimizer.apply_gradient(grad['deq'], learning_rate=state.lr),
            state.score_optimizer.apply_gradient(grad['score'], learning_rate=state.lr))

  if deq_score_joint:
    return optimize_joint_fn
  else:
    return optimize_fn


def get_step_fn(loss_fn, optimize_fn=None):
  def step_fn(state, batch):
    loss, grad = jax.value_and_grad(loss_fn)(state.optimizer.target, batch)
    new_optimizer = optimize_fn(state, grad)
    new_params_ema = jax.tree_util.tree_map(
        lambda p_ema, p: p_ema * state.ema_rate + p * (1. - state.ema_rate),
        state.params_ema, new_optimizer.target)
    new_state = state.replace(step=state.step + 1, optimizer=new_optimizer,
                              params_ema=new_params_ema)
    return new_state, loss
  return step_fn
