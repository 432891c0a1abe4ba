"""``--to orbax``: an orbax checkpoint directory of the TrainState, restored into a template."""
from .. import _load_code
from .. import _orbax_io
from . import OutputFormat

FORMAT = OutputFormat(
    name='orbax', rank=30, write=_orbax_io.write,
    help='an orbax checkpoint directory of that TrainState (each with every key that sat '
         'beside the optimizer)',
    reader=_load_code.ORBAX, template=_load_code.TRAIN_STATE,
    write_steps=' (orbax: save, commit)')
