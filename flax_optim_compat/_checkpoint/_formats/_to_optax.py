"""``--to optax``: msgpack ``{step, params, opt_state, ...}``, loaded into a plain dict."""
from .. import _load_code
from .. import _outputs
from . import OutputFormat

FORMAT = OutputFormat(
    name='optax', rank=10, write=_outputs.write_msgpack,
    help='msgpack {step, params, opt_state}, loaded as a dict',
    reader=_load_code.MSGPACK, template=_load_code.DICT)
