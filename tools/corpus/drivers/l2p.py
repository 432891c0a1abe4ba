"""google-research's l2p (Learning to Prompt, continual learning with ViT prompts):
``train_continual.create_optimizer`` builds, from the config, a ``flax.optim.MultiOptimizer`` of
two ``ModelParamTraversal`` groups (``freeze_part``: Adam for the prompts and head, Adam for the
frozen encoder / embedding / cls; ``optim_wd_ignore``: Adam with and without weight decay), or a
plain ``Adam`` / nesterov ``Momentum``; ``train_step``, pmapped, steps it with
``apply_gradient(grad, hyper_params=[hp[0].replace(learning_rate=lr),
hp[1].replace(learning_rate=0)])`` when freezing, else ``apply_gradient(grad, learning_rate=lr)``.

Three runs of the program's own code, each from ``configs/cifar100_l2p.get_config()`` (the L2P
config) with small shapes: a driver-registered ``ViT-tiny`` (patches 8x8 on 32x32x3 images,
hidden 16, 2 heads, 2 layers, mlp 32, dropout 0.1), batch 4 per device, 3 tasks of 5 classes
(15 in all), prompt pool 6 of length 2, top-k 2, ``learning_rate`` 1.0 (so the global rate is
4 / 256):

* ``l2p``: the config as it is (``optim`` adam, ``freeze_part`` encoder / embedding / cls,
  ``pull_constraint``, the class mask): the ``hyper_params`` overrides;
* ``wd_ignore``: ``optim`` adamw, ``weight_decay`` 1e-4, ``optim_wd_ignore`` prompt / head, no
  ``freeze_part`` (the first MultiOptimizer, ``apply_gradient(grad, learning_rate=lr)``),
  cosine schedule with 1 warm-up epoch;
* ``sgd``: ``optim`` sgd (nesterov ``Momentum`` 0.9), no ``freeze_part``.

Per run: ``create_train_state`` (the model, its ``init``, ``create_optimizer``), then for task 0
and task 1 the statements of ``train_and_evaluate_per_task`` up to its ``p_train_step``
(task 1 re-creates the optimizer from the trained parameters, ``reinit_optimizer``; the
learning-rate function; ``flax_utils.replicate``; the pmapped ``functools.partial(train_step,
...)``), then STEPS steps as its loop takes them (``fold_in(drop_out_rng, step)`` split per
device; ``state, metrics_update = p_train_step(state=..., batch=..., rng=...)``) on random
images and labels of the task's classes, and ``flax_utils.unreplicate`` at the end of the task.
The trajectory: per step the loss, the rate and the gradient norm of the program's own
``TrainMetrics`` (clu), then each run's final parameters and model state.

Stand-ins: tensorflow, tensorflow_datasets, tensorflow_addons, tensorboard (the input pipeline
and its augmentations, ``tf.io.gfile``, clu's checkpoint and metric writers,
``clu.deterministic_data``; the batches are the driver's); the pretrained ViT that the program loads with ``utils_vit.load_pretrained`` for the [cls] features of prompt selection
(``original_vit_params``) is the ``init`` of the same ``vit.create_original_vit`` model (a
download otherwise). Needs ml_collections, clu, wrapt, etils (``--site``).
"""
import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'tensorflow_addons',
                               'tensorboard')
import functools  # noqa: E402
import sys  # noqa: E402

import flax.jax_utils as flax_utils  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import ml_collections  # noqa: E402
import numpy as np  # noqa: E402

# clu.deterministic_data (tf.data input pipelines, read by libml/input_pipeline.py) reads
# tensorflow_datasets' version when imported: a stand-in like the libraries under it.
sys.modules['clu.deterministic_data'] = _driver._StandIn()

import train_continual  # noqa: E402
from configs import cifar100_l2p  # noqa: E402
from models import vit  # noqa: E402

TINY = ml_collections.ConfigDict({
    'name': 'ViT-tiny', 'patches': {'size': (8, 8)}, 'hidden_size': 16,
    'transformer': {'mlp_dim': 32, 'num_heads': 2, 'num_layers': 2,
                    'attention_dropout_rate': 0.0, 'dropout_rate': 0.1},
    'classifier': 'token', 'representation_size': None})
vit.MODEL_CONFIGS['ViT-tiny'] = TINY  # create_train_state dispatches on 'ViT'
TASKS, PER_TASK, BATCH = 3, 5, 4
NUM_CLASSES = TASKS * PER_TASK
NAMES = ['review_trick', 'optimizer', 'state', 'param_dict', 'rng', 'data_rng',
         'global_batch_size', 'num_train_steps', 'steps_per_epoch', 'eval_every_steps',
         'summary_step_div', 'num_review_steps', 'global_num_steps', 'base_learning_rate',
         'learning_rate_fn', 'checkpoint_dir', 'initial_step', 'disable_l2_wd', 'p_train_step']


def config_for(run):
  config = cifar100_l2p.get_config()
  config.model_name = 'ViT-tiny'
  config.per_device_batch_size = BATCH
  config.learning_rate = 1.0
  config.continual.num_tasks = TASKS
  config.continual.num_classes_per_task = PER_TASK
  config.prompt_pool_param.pool_size = 6
  config.prompt_pool_param.length = 2
  config.prompt_pool_param.top_k = 2
  if run == 'wd_ignore':
    config.optim = 'adamw'
    del config['weight_decay']  # an int field (0) in the config file
    config.weight_decay = 1e-4
    config.optim_wd_ignore = ['prompt', 'head']
    config.freeze_part = []
    config.learning_rate_schedule = 'cosine'
    config.warmup_epochs = 1
  elif run == 'sgd':
    config.optim = 'sgd'
    config.freeze_part = []
  return config


def run(name, losses, held):
  config = config_for(name)
  rng = jax.random.PRNGKey(config.seed)
  rng, model_rng = jax.random.split(rng)
  input_shape = (1, 32, 32, 3)
  model, state = train_continual.create_train_state(config, model_rng, input_shape, NUM_CLASSES)
  original_cls, _ = vit.create_original_vit(config.model_name)
  original_vit_model = functools.partial(original_cls, num_classes=NUM_CLASSES)
  rng, model_rng = jax.random.split(rng)
  original_vit_params = original_vit_model(train=False).init(
      model_rng, jnp.ones(input_shape))['params']
  class_mask_list = [list(range(t * PER_TASK, (t + 1) * PER_TASK)) for t in range(TASKS)]
  # 8 examples per task: 10 steps over config.num_epochs = 5 (2 per epoch) for the schedule.
  class_stats_list = [(2 * BATCH, BATCH)] * TASKS
  data = np.random.RandomState(1)
  for task_id in range(2):
    ns = _driver.run_statements(
        train_continual, 'train_and_evaluate_per_task', NAMES, stop='p_train_step_flag',
        task_id=task_id, config=config, workdir='/nonexistent', model=model, state=state,
        original_vit_model=original_vit_model, original_vit_params=original_vit_params,
        num_total_class=NUM_CLASSES, train_ds_list=None, eval_ds_list=None,
        class_stats_list=class_stats_list, class_mask_list=class_mask_list,
        acc_matrix=None, writer=None, replay_buffer=None, rng=rng)
    state, p_train_step, rng = ns['state'], ns['p_train_step'], ns['rng']
    rng, drop_out_rng = jax.random.split(rng, 2)
    drop_out_rng = jax.random.fold_in(drop_out_rng, jax.process_index())
    initial_step = ns['initial_step']
    for step in range(initial_step, initial_step + steps):
      batch = {
          'image': data.uniform(0, 1, (1, BATCH, 32, 32, 3)).astype(np.float32),
          'label': data.choice(class_mask_list[task_id], (1, BATCH)).astype(np.int32)}
      drop_out_rng_step = jax.random.fold_in(drop_out_rng, step)
      drop_out_rng_step_all = jax.random.split(drop_out_rng_step, jax.local_device_count())
      state, metrics_update = p_train_step(state=state, batch=batch, rng=drop_out_rng_step_all)
      metric_update = flax_utils.unreplicate(metrics_update)
      # Each metric's own compute (clu's Collection.compute also computes loss_std, whose
      # jnp.clip(a_min=...) today's jax refuses: clu's code, not the program's).
      losses.extend(getattr(metric_update, k).compute() for k in ('loss', 'learning_rate',
                                                                    'l2_grads'))
    state = flax_utils.unreplicate(state)
  held.extend([_driver.params_of(state.optimizer), state.model_state])


losses, held = [], []
for name in ('l2p', 'wd_ignore', 'sgd'):
  run(name, losses, held)
_driver.emit(losses, held)
