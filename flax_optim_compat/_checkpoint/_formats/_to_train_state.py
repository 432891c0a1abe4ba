"""``--to train-state``: msgpack ``{step, params, opt_state, ...}``, loaded as a flax TrainState."""
from .. import _load_code
from .. import _outputs
from . import OutputFormat

FORMAT = OutputFormat(
    name='train-state', rank=20, write=_outputs.write_msgpack,
    help='the same, loaded as a flax TrainState',
    reader=_load_code.MSGPACK, template=_load_code.TRAIN_STATE)
