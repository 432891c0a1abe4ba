"""``--to legacy``: a converted checkpoint back to a legacy msgpack file (flax 0.5.3 restores it)."""
from .. import _outputs
from . import OutputFormat

FORMAT = OutputFormat(
    name='legacy', rank=40, write=_outputs.write_msgpack, reads_converted=True,
    help='back to a legacy msgpack file, those keys included')
