"""google-research's xmcgan_image_generation at 22a7ef29 (XMC-GAN, text-to-image with a
generator and a discriminator in Linen): the program's own ``train_utils.create_train_state``
(``model.init`` of both networks, two ``Adam(learning_rate=..., beta1=0.5, beta2=0.999)
.create(params)`` in the program's ``TrainState`` dataclass beside an EMA of the generator's
parameters) and its ``train_utils.train_step`` pmapped as ``train_utils.train`` does (one
``xmc_gan.train_d`` step of the discriminator, then ``xmc_gan.train_g_d``: both networks'
gradients through one ``jax.vjp``, ``lax.pmean``, each optimizer's ``apply_gradient``, the EMA
update), STEPS steps.

The configuration is the program's ``configs/coco_xmc.get_test_config()`` (gf_dim = df_dim = 16,
z_dim = 8) in float32, without the pre-trained ResNet image-contrastive term (its weights are
a download): 128x128 images, 4 per step (2 per sub-step), word and sentence embeddings of 32
features, 5 words, all random and the same every step. The trajectory: per step the four
losses the program's metrics report (``d_loss``, ``g_loss``, ``c_loss_d``, ``c_loss_g``) and
the state's step, then both networks' parameters, the EMA parameters and the generator's batch
statistics after the last step. Stand-ins (not on the training path): tensorflow,
tensorflow_datasets, tensorflow_gan, tensorflow_hub (the input pipeline, the FID code),
tensorboard (clu's writers), PIL (image files), clu's ``deterministic_data`` (tf.data helpers,
which read tensorflow_datasets' version at import). clu itself, whose ``metrics.Collection`` the
train step returns, is the library's own (``--site`` with clu, absl-py, etils, wrapt and
ml_collections). One step compiles for about 3 minutes on a CPU.
"""
import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'tensorflow_gan',
                               'tensorflow_hub', 'tensorboard', 'PIL')
import functools  # noqa: E402
import sys  # noqa: E402
from unittest import mock  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import jax_utils  # noqa: E402

sys.modules['clu.deterministic_data'] = mock.MagicMock()
from xmcgan import train_utils  # noqa: E402
from xmcgan import xmc_gan  # noqa: E402
from xmcgan.configs import coco_xmc  # noqa: E402

config = coco_xmc.get_test_config()
config.dtype = 'float32'
config.pretrained_image_contrastive = False
config.batch_size = 4

WORDS, FEATURES = 5, 32
rng = np.random.RandomState(0)


def batch_of(n):
  return {
      'image': rng.uniform(-1, 1, (n, 128, 128, 3)).astype(np.float32),
      'sentence_embedding': rng.normal(size=(n, FEATURES)).astype(np.float32),
      'embedding': rng.normal(size=(n, WORDS, FEATURES)).astype(np.float32),
      'max_len': np.full((n, 1), WORDS - 1, np.int32),
  }


batch = batch_of(config.batch_size)
init_batch = train_utils.split_input_dict(batch, config.d_step_per_g_step)[0]
generator, discriminator, state = train_utils.create_train_state(
    config, jax.random.PRNGKey(0), init_batch)
state = jax_utils.replicate(state)
p_train_step = jax.pmap(
    functools.partial(
        train_utils.train_step, gan_model=xmc_gan, generator=generator,
        discriminator=discriminator, config=config,
        additional_data=xmc_gan.create_additional_data(config)),
    axis_name='batch')
device_batch = jax.tree_util.tree_map(lambda x: x[None], batch)

losses = []
train_rng = jax.random.PRNGKey(1)
for step in range(1, steps + 1):
  step_rngs = jax.random.split(jax.random.fold_in(train_rng, step), jax.local_device_count())
  state, metrics_update = p_train_step(step_rngs, state, device_batch)
  values = jax_utils.unreplicate(metrics_update).compute()
  losses.extend([values['d_loss'], values['g_loss'], values['c_loss_d'], values['c_loss_g'],
                 jax_utils.unreplicate(state.step)])
state = jax_utils.unreplicate(state)
_driver.emit(losses, [_driver.params_of(state.g_optimizer), _driver.params_of(state.d_optimizer),
                      state.ema_params, state.generator_state])
