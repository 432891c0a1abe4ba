"""The output formats are one unit each: a module of ``_checkpoint/_formats/`` that the CLI's
``--to``, ``convert`` and the load-code printer all look up. A throwaway format added the way a
new one is (its module's ``FORMAT``, registered as the folder's modules are) appears in
``--to``, writes, and prints load code that runs; removed again, it is gone everywhere.
"""
import ast
import gzip
import itertools
import json
import pathlib
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import serialization

from flax_optim_compat import convert
from flax_optim_compat._checkpoint import _formats
from flax_optim_compat._checkpoint import _load_code
from flax_optim_compat._checkpoint import _outputs
from flax_optim_compat._cli import _main as _cli
from tests import _utils

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

TS = _utils.legacy_checkpoint('TrainState-Adam')
ADAM = 'Adam(learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6, weight_decay=0.01)'
BUILT_IN = ['optax', 'train-state', 'orbax', 'legacy']
FORMATS_DIR = pathlib.Path(_formats.__file__).parent
CONVERT_DOC = pathlib.Path(__file__).parents[2] / 'docs' / 'convert.md'


def _to_choices():
  """``convert --to``'s choices, as the parser the CLI runs has them."""
  parser = _cli._parser()  # pylint: disable=protected-access
  convert_parser = next(a for a in parser._actions  # pylint: disable=protected-access
                        if a.dest == 'command').choices['convert']
  return list(next(a for a in convert_parser._actions  # pylint: disable=protected-access
                   if a.dest == 'to').choices)


def test_the_built_in_formats_are_the_folders_modules():
  assert [f.name for f in convert.output_formats()] == BUILT_IN == _to_choices()
  modules = sorted(p.stem for p in FORMATS_DIR.glob('_to_*.py'))
  assert len(modules) == len(BUILT_IN)
  with pytest.raises(convert.CheckpointError) as error:
    convert.output_format('zip')
  assert str(error.value) == f"no output format 'zip'; the formats are {', '.join(BUILT_IN)}."


def _doc_table_names():
  """The ``--to`` values in the first column of docs/convert.md's ``--to | writes | loaded
  with`` table, in its order."""
  lines = CONVERT_DOC.read_text(encoding='utf-8').splitlines()
  start = lines.index('| `--to` | writes | loaded with |') + 2  # past the header and |---|
  names = []
  for line in itertools.takewhile(lambda line: line.startswith('|'), lines[start:]):
    first = line.strip('|').split('|')[0].strip()
    assert first.startswith('`') and first.endswith('`'), line
    names.append(first.strip('`'))
  return names


def test_every_format_has_its_row_in_the_docs_table():
  """A registered format without a row, or a row naming no format, fails here."""
  names = _doc_table_names()
  assert len(names) == len(set(names)), names
  registered = [f.name for f in convert.output_formats()]
  missing = [name for name in registered if name not in names]
  assert not missing, f'docs/convert.md\'s --to table has no row for {missing}'
  unknown = [name for name in names if name not in registered]
  assert not unknown, f'docs/convert.md\'s --to table has rows for no format: {unknown}'


def test_the_cli_compares_no_format_names():
  """The CLI reads a format's properties; it never tests ``args.to`` against a name."""
  source = pathlib.Path(_cli.__file__).read_text(encoding='utf-8')
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Compare):
      constants = [c.value for c in [node.left, *node.comparators]
                   if isinstance(c, ast.Constant)]
      assert not set(constants) & set(BUILT_IN), ast.unparse(node)
    if isinstance(node, ast.Attribute) and node.attr == 'to':
      assert ast.unparse(node) == 'args.to'


# ----------------------------------------------------------------------------- a throwaway format

def _write_gzip(path, tree):
  data = gzip.compress(serialization.msgpack_serialize(serialization.to_state_dict(tree)))
  _outputs.write_file(path, lambda f: f.write(data))


def _gzip_restore(path, node_path):
  assert not node_path  # the throwaway format writes the flat layout only
  return [f'with gzip.open({path!r}, \'rb\') as f:',
          '  state = serialization.from_bytes(template, f.read())']


def _throwaway_module():
  """What a new format's module holds: its ``FORMAT``."""
  module = types.ModuleType('_to_gzip')
  module.FORMAT = _formats.OutputFormat(
      name='gzip-train-state', rank=25, write=_write_gzip,
      help='gzip-compressed msgpack, loaded as a flax TrainState',
      reader=_load_code.Reader(_gzip_restore, imports={'gzip': 'import gzip'}),
      template=_load_code.TRAIN_STATE)
  return module


@pytest.fixture
def throwaway():
  fmt = _formats.register_module(_throwaway_module())
  try:
    yield fmt
  finally:
    _formats.unregister(fmt.name)


def test_a_throwaway_format_is_added_and_removed_in_one_module(capsys, tmp_path, throwaway):
  # Among the built-in choices, at its rank's place.
  choices = _to_choices()
  assert [name for name in choices if name != throwaway.name] == BUILT_IN
  assert choices.index(throwaway.name) == sum(f.rank < throwaway.rank
                                              for f in convert.output_formats())
  assert convert.output_format('gzip-train-state') is throwaway
  out = tmp_path / 'state.msgpack.gz'
  code, stdout, err = _utils.run_cli(capsys, 'convert', TS, '--optimizer', ADAM, '--to',
                                     'gzip-train-state', '--out', str(out), '--json')
  assert code == 0, err
  printed = json.loads(stdout)
  assert printed['to'] == 'gzip-train-state'
  raw = _utils.legacy_checkpoint_tree('TrainState-Adam')
  written = serialization.msgpack_restore(gzip.decompress(out.read_bytes()))
  _utils.assert_trees_close(written['params'], raw['optimizer']['target'], rtol=0)
  assert int(written['step']) == int(raw['step'])
  # The printed code names its own import and runs as printed.
  assert 'import gzip' in printed['load_code'].split('\n\n')[0].splitlines()
  zeros = lambda tree: jax.tree_util.tree_map(  # pylint: disable=g-long-lambda
      lambda x: jnp.zeros(np.shape(x), np.asarray(x).dtype), tree)
  namespace = {'params': zeros(raw['optimizer']['target'])}
  exec(printed['load_code'], namespace)  # pylint: disable=exec-used
  _utils.assert_trees_close(namespace['state'].params, raw['optimizer']['target'], rtol=0)
  _utils.assert_trees_close(namespace['state'].model_state, raw['model_state'], rtol=0)
  # convert's load_code reads the same registry.
  assert convert.load_code(written, out, tx=printed['tx'], to='gzip-train-state') == \
      printed['load_code']


def test_a_removed_format_is_gone_everywhere(capsys, tmp_path):
  fmt = _formats.register_module(_throwaway_module())
  with pytest.raises(ValueError, match="'gzip-train-state' is already registered"):
    _formats.register(fmt)
  _formats.unregister(fmt.name)
  assert _to_choices() == BUILT_IN
  assert _cli.main(['convert', TS, '--optimizer', ADAM, '--to', 'gzip-train-state', '--out',
                    str(tmp_path / 'x')]) == 2  # a usage error
  assert "invalid choice: 'gzip-train-state'" in capsys.readouterr().err
  assert not (tmp_path / 'x').exists()
