"""The command-line expression parsers (private): ``--optimizer`` and ``--tx`` text, parsed
against allowlists and never evaluated. Used by the CLI and by ``migrate``.

``_core``: limits, errors, literals, the checked parse; ``_optimizer``: ``--optimizer`` (legacy
defs, MultiOptimizer regexes); ``_optax``: what optax offers ``--tx``; ``_tx``: ``--tx``.
"""
