def create(opt_def, params):
    return opt_def.create(params)


def step(optimizer, grad):
    return optimizer.apply_gradient(grad), optimizer.target
