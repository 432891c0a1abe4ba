"""dpm_solver_score_sde.py with `config.optim.weight_decay = 0.05` (Adam with decay -> optax adamw)."""
import os
import runpy
os.environ['WEIGHT_DECAY'] = '0.05'
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'dpm_solver_score_sde.py'),
               run_name='__main__')
