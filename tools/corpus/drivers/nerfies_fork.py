"""Sulwon-0516/nerfies (a fork of google/nerfies): `train.main` builds
`optim.Adam(learning_rate_sched(0)).create(params)` into `model_utils.TrainState(optimizer, warp_alpha,
time_alpha)`, restores a checkpoint into it, reads `init_step = state.optimizer.state.step + 1`,
replicates it and pmaps `training.train_step`, which calls
`optimizer.apply_gradient(grad, learning_rate=scalar_params.learning_rate)`;
`training.save_checkpoint` reads `state_to_save.optimizer.state.step`.

The statements of `train.main` that assign the schedules, the model and its parameters, the
optimizer, the state, the scalar params, `init_step` (restore from an empty folder), the
replicate, `train_step` / `ptrain_step` and the keys (up to `time_tracker`), run as the program
wrote them (or as migrate rewrote them), with the program's own config classes: a small NeRF
(trunk 2x32, rgb branch 1x16, 8 coarse + 8 fine samples, 4 point freqs), appearance metadata,
an SE(3) warp field (GLO codes) and every regulariser on (elastic loss with the 'median' reduce,
background loss, warp-reg loss), exponential lr schedule; 16 random rays per step, 8 background
points. Then STEPS steps as `main` makes them (scalar params and alphas from the schedules),
`training.save_checkpoint` into a fresh folder, and `main`'s statements that assign `state` and
`init_step` again with that folder as `checkpoint_dir` (a fresh state restored from the saved
checkpoint). The trajectory: init_step (fresh), per step every stat (sorted keys), then the
resumed init_step, the final parameters and the restored parameters.

Driver shims, the same on both sides: `collections.Mapping` (gone in Python 3.10; the
program's `schedules.from_config` tests it) is `collections.abc.Mapping`; `flax.io` is imported
before the tensorflow stand-in, and `flags.mark_flag_as_required` is a no-op (`train` marks --base_folder required at import, and
`jax.config.parse_flags_with_absl()` validates it; the driver gives the folders itself). Needs
gin, immutabledict (`--site`).
"""
import collections
import collections.abc
import os
import tempfile
import _driver  # noqa: E402
import flax.io  # noqa: E402,F401  before the tensorflow stand-in: real file functions

collections.Mapping = collections.abc.Mapping
program, steps = _driver.setup('tensorflow', 'tensorboard', 'PIL', 'cv2', 'matplotlib',
                               'imageio', 'tqdm')
import types  # noqa: E402

from absl import flags  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import jax_utils  # noqa: E402
from nerfies import configs, training  # noqa: E402
flags.mark_flag_as_required = lambda *a, **k: None  # --base_folder: the driver gives folders
import train  # noqa: E402

B, NP = 16, 8
model_config = configs.ModelConfig(
    nerf_trunk_depth=2, nerf_trunk_width=32, nerf_rgb_branch_depth=1, nerf_rgb_branch_width=16,
    nerf_skips=(1,), num_coarse_samples=8, num_fine_samples=8, num_nerf_point_freqs=4,
    num_nerf_viewdir_freqs=2, use_appearance_metadata=True, use_warp=True,
    warp_field_type='se3', num_warp_freqs=4, num_warp_features=4, noise_std=None)
train_config = configs.TrainConfig(
    batch_size=B, lr_schedule=('exponential', 1e-2, 1e-4, 10), max_steps=10,
    warp_alpha_schedule=('linear', 0.0, 4.0, 10), use_elastic_loss=True,
    elastic_loss_weight_schedule=('constant', 0.01), elastic_reduce_method='median',
    use_background_loss=True, background_loss_weight=1.0, background_points_batch_size=NP,
    use_warp_reg_loss=True, warp_reg_loss_weight=0.1)
exp_config = configs.ExperimentConfig()
datasource = types.SimpleNamespace(appearance_ids=(0, 1, 2), camera_ids=(), warp_ids=(0, 1, 2),
                                   near=0.5, far=3.0)


def names():
  return ['learning_rate_sched', 'warp_alpha_sched', 'time_alpha_sched',
          'elastic_loss_weight_sched', 'rng', 'key', 'params', 'model', 'optimizer_def',
          'optimizer', 'state', 'scalar_params', 'init_step', 'devices']


empty = tempfile.mkdtemp()
ns = _driver.run_statements(
    train, 'main', names() + ['train_step', 'ptrain_step', 'n_local_devices', 'keys'],
    stop='time_tracker', exp_config=exp_config, model_config=model_config,
    train_config=train_config, datasource=datasource, checkpoint_dir=empty)
state, keys, scalar_params = ns['state'], ns['keys'], ns['scalar_params']
out = [ns['init_step']]
data = np.random.RandomState(0)
for step in range(ns['init_step'], ns['init_step'] + steps):
  directions = data.randn(1, B, 3).astype(np.float32)
  directions /= np.linalg.norm(directions, axis=-1, keepdims=True)
  batch = {
      'origins': data.randn(1, B, 3).astype(np.float32) * 0.1,
      'directions': directions, 'viewdirs': directions,
      'metadata': {'warp': data.randint(0, 3, (1, B, 1)).astype(np.uint32),
                   'appearance': data.randint(0, 3, (1, B, 1)).astype(np.uint32),
                   'camera': np.zeros((1, B, 1), np.uint32),
                   'time': data.rand(1, B, 1).astype(np.float32)},
      'rgb': data.rand(1, B, 3).astype(np.float32),
      'background_points': data.randn(1, NP, 3).astype(np.float32),
  }
  scalar_params = scalar_params.replace(
      learning_rate=ns['learning_rate_sched'](step),
      elastic_loss_weight=ns['elastic_loss_weight_sched'](step))
  warp_alpha = jax_utils.replicate(ns['warp_alpha_sched'](step), ns['devices'])
  time_alpha = jax_utils.replicate(ns['time_alpha_sched'](step), ns['devices'])
  state = state.replace(warp_alpha=warp_alpha, time_alpha=time_alpha)
  state, stats, keys = ns['ptrain_step'](keys, state, batch, scalar_params)
  flat = jax.tree_util.tree_flatten_with_path(stats)[0]
  out += [np.asarray(v).ravel()[0] for _, v in sorted(flat, key=lambda kv: str(kv[0]))]
saved = tempfile.mkdtemp()
training.save_checkpoint(saved, state)
again = _driver.run_statements(
    train, 'main', names(), stop='summary_writer', exp_config=exp_config,
    model_config=model_config, train_config=train_config, datasource=datasource,
    checkpoint_dir=saved)
out.append(again['init_step'])
final = jax.tree_util.tree_map(lambda x: x[0], state)
restored = jax.tree_util.tree_map(lambda x: x[0], again['state'])
_driver.emit(out, (_driver.params_of(final.optimizer), _driver.params_of(restored.optimizer)))
