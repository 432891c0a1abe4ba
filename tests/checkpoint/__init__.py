"""Tests of the checkpoint tool: convert.py and flax_optim_compat/_checkpoint/."""
