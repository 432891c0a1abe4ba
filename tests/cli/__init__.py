"""Tests of flax_optim_compat/_cli/ (the folder mirrors the package's)."""
