import flax
import myopt
import util

inner = flax.optim.Adam(learning_rate=1e-3)
optimizer = util.create(myopt.Clip(inner), {'w': 0.0})
