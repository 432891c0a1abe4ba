"""Tests of flax_optim_compat/_expr/ (the folder mirrors the package's)."""
