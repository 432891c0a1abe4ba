"""The ``flax-optim-compat`` program (private): ``_main`` parses the command line (inspect,
convert, diff, migrate, demo) and ``_demo`` is the demo it runs."""
