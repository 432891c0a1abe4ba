import flax
import util

opt_def = flax.optim.Adam(learning_rate=1e-3)
optimizer = util.create(opt_def, {'w': 0.0})
