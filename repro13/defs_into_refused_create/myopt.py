import flax


class Clip(flax.optim.OptimizerDef):
    def __init__(self, inner):
        super().__init__(inner.hyper_params)
        self.inner = inner

    def init_param_state(self, param):
        return self.inner.init_param_state(param)

    def apply_param_gradient(self, step, hyper_params, param, state, grad):
        return self.inner.apply_param_gradient(step, hyper_params, param, state, grad)
