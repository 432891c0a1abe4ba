"""Tests of flax_optim_compat/_migrate/ (the folder mirrors the package's)."""
