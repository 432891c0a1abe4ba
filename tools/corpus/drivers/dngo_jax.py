"""asrvsn/dngo-jax (neural Bayesian optimisation, DNGO): ``dngo_jax/dngo.py``'s own statements
of its ``if __name__ == '__main__':`` block that build the model and the optimizer
(``acq = Acquisition()``, its ``init``, ``flax.optim.Adam(learning_rate=learning_rate,
beta1=momentum)`` and ``.create(params)``), then the program's ``train``: STEPS eager epochs of
``jax.grad(loss_fn)(optim.target)`` and ``optim.apply_gradient(grad)`` on the whole batch (no
jit), each call of ``train`` ending with its BFGS fit of the Bayesian linear regression's ``alpha``
and ``beta`` on the trained basis (``jax.scipy.optimize.minimize``, not on the optimizer path).

Synthetic data: 32 inputs in [0, 1] (seed 0) and the sinc target of the block, normalised by the
program's ``normalize``; ``learning_rate`` 0.1 and ``momentum`` 0.9, the block's values.
``train`` runs one epoch per call, STEPS calls. The trajectory: the mean squared error after
each epoch, then every final parameter. The BFGS fit's ``alpha`` and ``beta`` are left out: on
these data the fit is ill-conditioned (``alpha`` comes out negative, so the marginal
log-likelihood is NaN), and parameters that differ in their last bit move it (alpha by 13 %
after 5 epochs).
Stand-ins: matplotlib (the block's plots, not run).
"""
import _driver

program, steps = _driver.setup('matplotlib')
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from dngo_jax import dngo  # noqa: E402

X_train = jax.random.uniform(jax.random.PRNGKey(0), (32, 1))
X_bar, _, _ = dngo.normalize(X_train)
Y_bar, _, _ = dngo.normalize(jnp.sinc(X_train * 10 - 5))
built = _driver.run_statements(dngo, None, ('key', 'acq', 'params', 'optim_def', 'optim'),
                               stop='alpha', learning_rate=0.1, momentum=0.9, X_train=X_train)
optim, losses = built['optim'], []
for _ in range(steps):  # one epoch a call: the loss after each update is read between them
  optim, _, _ = dngo.train(optim, built['acq'], X_bar, Y_bar, 1, 1.0, 1000.0)
  params = _driver.params_of(optim)
  losses.append(dngo.mse_loss(built['acq'].apply({'params': params}, X_bar), Y_bar))
_driver.emit(losses, params)
