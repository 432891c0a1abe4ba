"""The checkpoint tool's plumbing (private): bytes, files and state dicts.

``flax_optim_compat.convert`` is this wing's public face; the CLI uses that face only. Nothing in
the legacy API (``base``, the optimizers) imports this package.
"""
