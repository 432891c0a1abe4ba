"""matthias-wright's flaxmodels, ``training/few_shot_gan_adaption`` (few-shot adaptation of a
StyleGAN2, Ojha et al. 2021): optax Adam for both networks already; what is flax.optim is
``flax.optim.dynamic_scale.DynamicScale``, the loss scaling that ``training.train_and_evaluate``
creates for the generator's and the discriminator's main and regularization steps when
``--mixed_precision`` runs on a GPU, held in ``training_utils.TrainStateG`` / ``TrainStateD``
and used by every pmapped step of ``training_steps`` (``dynamic_scale.value_and_grad(...)``,
then ``jnp.where(is_fin, new, old)`` over the optax state and the parameters).

The program's own statements of ``train_and_evaluate`` up to its pmapped steps (seeding, the
dynamic scales, the four models and their ``init``, the optax transforms, the two train states,
``replicate``, the five ``jax.pmap``s), with ``platform`` given as ``'gpu'`` and
``--mixed_precision`` on, so that the DynamicScale branch runs (float16 on the 4 highest
resolutions, ``clip_conv`` 256, as on a GPU); then STEPS iterations of its training loop's body
(``sample_z`` around the anchors every ``subspace_freq`` steps, ``p_main_step_D``,
``p_regul_step_D`` every ``D_reg_interval``, ``p_main_step_G``, ``p_dist_step_G``,
``p_regul_step_G`` every ``G_reg_interval`` with its path-length noise,
``update_generator_ema``), as the loop writes them. Small shapes: 16x16x3 images, batch 4,
z / w 512 (the mapping network's layer width, which the program does not set), ``fmap_base`` 64
(the discriminator's too, see below), ``D_reg_interval`` = ``G_reg_interval`` = 2, ``subspace_freq`` 2,
8 examples. The trajectory: per step every metric the steps return (losses, logits, scales;
not the generated images), then the final generator and discriminator parameters, the
optimizers' states, the moving statistics, the EMA generator and ``pl_mean``.

Stand-ins: the program's ``model`` module (``import model``; not in the repository at this
commit) is the repository's own ``flaxmodels.few_shot_gan_adaption`` (``MappingNetwork``,
``SynthesisNetwork``, ``Generator``, ``Discriminator``, the same constructor arguments; the
discriminator's ``fmap_base`` 64, which the program leaves at its default), passed
with ``--also FLAXMODELS`` (h5py, requests, tqdm, regex and filelock under it are for
pretrained weights and GPT-2's tokenizer, stand-ins); the source model's checkpoint
(``checkpoint.load_checkpoint``, a pickle of a trained StyleGAN2 and its config) is the
``init`` of the same models with another seed and the driver's ``config_source``; the dataset
(``data_pipeline.get_data``, tensorflow) is random images; the anchors read from a hard-coded
pickle (``dill``) are the ``jax.random.normal`` draw the line before them makes; tensorflow,
tensorflow_datasets, wandb, tqdm, PIL and the FID module are not on the optimizer path.
Given on both sides: ``jaxlib.xla_extension.DeviceArray`` (gone from jaxlib; ``training_utils``
imports it for ``isinstance`` checks) is ``jax.Array``: neither the package nor migrate gives it
at run time (migrate refuses and marks the import, FOM299; the held-out results of 2026-11-29,
defect 1). Not given on either side: flax's ``flax_return_frozendict`` (the program
``unfreeze()``s what ``init`` returns, defect 2, which the driver gave before): the legacy side
has it from the package; the migrated side runs on what migrate wrote (on 838edec it fails in
``merge_params``: FOM018 does not fire where FOM010 is the only rewrite of flax.optim, the
held-out results of 2026-11-30). For flaxmodels' ops (the library, not the program's, not
migrated), ``jnp.reshape`` takes its old ``newshape`` keyword.
"""
import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'wandb', 'tqdm', 'PIL',
                               'dill', 'h5py', 'requests', 'regex', 'filelock')
import argparse  # noqa: E402
import functools  # noqa: E402
import sys  # noqa: E402
import types  # noqa: E402

import flax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.modules['jaxlib.xla_extension'] = types.SimpleNamespace(DeviceArray=jax.Array)
# flaxmodels' ops (the library beside the program, not migrated) call
# jnp.reshape(x, newshape=...), a keyword today's jax no longer takes.
_reshape = jnp.reshape
jnp.reshape = lambda a, shape=None, *args, newshape=None, **kw: _reshape(
    a, newshape if shape is None else shape, *args, **kw)

import flaxmodels.few_shot_gan_adaption as models  # noqa: E402

# The program's `model` module: the repository's models, the discriminator 64 maps at its
# base (train_and_evaluate passes no fmap_base; the default, 512 maps everywhere, is 16M
# parameters at 16x16).
model = sys.modules['model'] = types.SimpleNamespace(
    MappingNetwork=models.MappingNetwork, SynthesisNetwork=models.SynthesisNetwork,
    Generator=models.Generator, Discriminator=functools.partial(models.Discriminator,
                                                                fmap_base=64))
sys.modules['fid'] = _driver._StandIn()

import checkpoint  # noqa: E402
import data_pipeline  # noqa: E402
import training  # noqa: E402
import training_utils  # noqa: E402

RES, Z, BATCH, EXAMPLES = 16, 512, 4, 8  # z = w = 512: the mapping layers are 512 wide
config_source = argparse.Namespace(
    z_dim=Z, c_dim=0, w_dim=Z, resolution=RES, img_channels=3, fmap_base=64,
    mbstd_group_size=None, mixing_prob=0.9, D_reg_interval=2, G_reg_interval=2, r1_gamma=10.0,
    pl_decay=0.01, pl_weight=2.0, ema_kimg=20.0, batch_size=BATCH)
# main.py's defaults, small shapes.
config = argparse.Namespace(
    data_dir=None, resolution=RES, img_channels=3, c_dim=0, batch_size=BATCH, random_seed=0,
    mixed_precision=True, source_ckpt_path=None, learning_rate=0.002, kl_weight=1000.0,
    subspace_std=0.1, subspace_freq=2, num_prefetch=0)


def source_checkpoint():
  """The source StyleGAN2's checkpoint: the same models' init, another seed."""
  keys = jax.random.split(jax.random.PRNGKey(7), 3)
  num_ws = int(np.log2(RES)) * 2 - 3
  kw = dict(fmap_base=config_source.fmap_base, num_fp16_res=4, clip_conv=256,
            dtype=jnp.float16)
  mapping = model.MappingNetwork(z_dim=Z, c_dim=0, w_dim=Z, num_ws=num_ws, num_layers=8,
                                 dtype=jnp.float16)
  synthesis = model.SynthesisNetwork(resolution=RES, num_channels=3, w_dim=Z, **kw)
  mapping_vars = mapping.init(keys[0], jnp.ones((1, Z)), jnp.ones((1, 0)))
  synthesis_vars = synthesis.init(keys[0], jnp.ones((1, num_ws, Z)))
  state_G = types.SimpleNamespace(
      params=flax.core.freeze({'mapping': mapping_vars['params'],
                               'synthesis': synthesis_vars['params']}),
      moving_stats=mapping_vars['moving_stats'], noise_consts=synthesis_vars['noise_consts'])
  # As train_and_evaluate builds it.
  discriminator = model.Discriminator(resolution=RES, num_channels=3, c_dim=0,
                                      mbstd_group_size=None, num_fp16_res=4, clip_conv=256,
                                      dtype=jnp.float16)
  params_D = discriminator.init(keys[1], jnp.ones((1, RES, RES, 3)), jnp.ones((1, 0)))
  generator = model.Generator(resolution=RES, num_channels=3, z_dim=Z, c_dim=0, w_dim=Z,
                              num_ws=num_ws, num_mapping_layers=8, **kw)
  params_ema_G = generator.init(keys[2], jnp.ones((1, Z)), jnp.ones((1, 0)))
  return {'config': config_source, 'state_G': state_G, 'params_ema_G': params_ema_G,
          'state_D': types.SimpleNamespace(params=params_D)}


checkpoint.load_checkpoint = lambda path, replicate=True: source_checkpoint()
data_pipeline.get_data = lambda **kw: (None, {'num_examples': EXAMPLES})
NAMES = ['num_devices', 'ds_train', 'dataset_info', 'rng', 'dtype', 'dynamic_scale_G_main',
         'dynamic_scale_D_main', 'dynamic_scale_G_reg', 'dynamic_scale_D_reg', 'clip_conv',
         'num_fp16_res', 'ckpt_source', 'config_source', 'mapping_net', 'synthesis_net',
         'init_rng', 'mapping_net_vars', 'mapping_net_params', 'moving_stats',
         'synthesis_net_vars', 'synthesis_net_params', 'noise_consts', 'params_G',
         'discriminator', 'params_D', 'generator_ema', 'params_ema_G', 'generator_source',
         'params_source_G', 'tx_G', 'tx_D', 'state_G', 'state_D', 'pl_mean', 'key', 'step',
         'p_main_step_G', 'p_regul_step_G', 'p_dist_step_G', 'p_main_step_D', 'p_regul_step_D']
ns = _driver.run_statements(training, 'train_and_evaluate', NAMES, stop='fid_metric',
                            config=config, platform='gpu')
assert ns['dynamic_scale_G_main'] is not None  # the DynamicScale branch
num_devices, rng, dtype = ns['num_devices'], ns['rng'], ns['dtype']
state_G, state_D, pl_mean, params_ema_G = (ns['state_G'], ns['state_D'], ns['pl_mean'],
                                           ns['params_ema_G'])
# train_and_evaluate's anchors, before the line that reads them from a pickle.
z_latent_anchors = jax.random.normal(rng, (EXAMPLES, Z), dtype)
data = np.random.RandomState(0)
values = []
for step in range(steps):
  batch = {'image': data.uniform(-1, 1, (num_devices, BATCH, RES, RES, 3)).astype(np.float32),
           'label': None}
  # The loop's body (training.py), without its logging and checkpoints.
  metrics = {}
  sub_space = step % config.subspace_freq == 0
  rng, key = jax.random.split(rng)
  z_latent1 = training_utils.sample_z(sub_space, z_latent_anchors, config.subspace_std,
                                      num_devices, config.batch_size, Z, key, dtype)
  rng, key = jax.random.split(rng)
  z_latent2 = training_utils.sample_z(sub_space, z_latent_anchors, config.subspace_std,
                                      num_devices, config.batch_size, Z, key, dtype)
  rkey = jax.random.split(key, num=num_devices)
  mixing_prob = flax.jax_utils.replicate(config_source.mixing_prob)
  state_D, metrics = ns['p_main_step_D'](state_G, state_D, batch, z_latent1, z_latent2, metrics,
                                         mixing_prob, sub_space, rkey)
  if step % config_source.D_reg_interval == 0:
    state_D, metrics = ns['p_regul_step_D'](state_D, batch, metrics, sub_space)
  state_G, metrics = ns['p_main_step_G'](state_G, state_D, batch, z_latent1, z_latent2, metrics,
                                         mixing_prob, rkey)
  state_G, metrics = ns['p_dist_step_G'](state_G, batch, z_latent1, metrics, rng=rkey)
  if step % config_source.G_reg_interval == 0:
    H, W = batch['image'].shape[1], batch['image'].shape[2]
    rng, key = jax.random.split(rng)
    pl_noise = jax.random.normal(key, batch['image'].shape, dtype=dtype) / np.sqrt(H * W)
    state_G, metrics, pl_mean = ns['p_regul_step_G'](state_G, batch, z_latent1, pl_noise,
                                                     pl_mean, metrics, rng=rkey)
  params_ema_G = training_utils.update_generator_ema(flax.jax_utils.unreplicate(state_G),
                                                     params_ema_G, config_source)
  values.extend(np.ravel(np.asarray(metrics[k], np.float64))
                for k in sorted(metrics) if k != 'image_gen')
final_G, final_D = flax.jax_utils.unreplicate(state_G), flax.jax_utils.unreplicate(state_D)
_driver.emit(np.concatenate(values), [
    final_G.params, final_G.opt_state, final_G.moving_stats, final_D.params, final_D.opt_state,
    params_ema_G, pl_mean])
