"""``python -m flax_optim_compat``: the ``flax-optim-compat`` command line (see ``_cli``)."""
import sys

from ._cli._main import main

if __name__ == '__main__':
  sys.exit(main())
