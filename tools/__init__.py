"""Developer tools of flax_optim_compat: the oracle fixture generators and the guide table."""
