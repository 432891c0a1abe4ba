"""``inspect`` of an orbax folder reads its metadata, never its arrays, and checks that the
data files its OCDBT manifest names are there and long enough; a folder plain orbax cannot
restore is refused in one line naming the file (exit 2), never described as fine.

Expected values: the legacy file's own shapes, and plain orbax's own verdict on each damaged
folder (it fails to restore each one refused here). The 1 GB case (bytes read and memory
independent of the arrays' size) runs where ``FLAX_OPTIM_COMPAT_LARGE_TESTS=1``, as
test_orbax_large.py.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from flax import serialization

from flax_optim_compat import convert
from tests import _utils

ocp = pytest.importorskip('orbax.checkpoint')
pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')


def _legacy(path, shape):
  """A GradientDescent file: a kernel of ``shape`` (stored outside orbax's b-tree when over
  1 KB), a small bias, step 5, a carried int32 epoch."""
  rng = np.random.default_rng(0)
  tree = {'step': np.int32(5), 'epoch': np.int32(2), 'optimizer': {
      'target': {'kernel': rng.standard_normal(shape, np.float32),
                 'bias': np.arange(3, dtype=np.float32)},
      'state': {'step': np.int32(5), 'param_states': {'kernel': {}, 'bias': {}}}}}
  path.write_bytes(serialization.msgpack_serialize(tree))
  return tree


@pytest.fixture(scope='module')
def orbax_output(tmp_path_factory):
  tmp = tmp_path_factory.mktemp('orbax')
  tree = _legacy(tmp / 'legacy', (64, 64))
  convert.to_orbax(str(tmp / 'legacy'), _gd(), tmp / 'out')
  return tmp / 'out', tree


def _gd():
  import flax_optim_compat as optim  # pylint: disable=g-import-not-at-top
  return optim.GradientDescent(0.1)


_RESTORES = """
import json, sys
import orbax.checkpoint as ocp
verdicts = []
for path in sys.argv[1:]:
  try:
    with ocp.StandardCheckpointer() as checkpointer:
      checkpointer.restore(path)
    verdicts.append(True)
  except Exception:
    verdicts.append(False)
print(json.dumps(verdicts))
"""


def _restores(*paths):
  """Whether plain orbax restores each folder (in one child: a failed restore leaves orbax's
  coroutines to be collected, noise this suite's warnings-as-errors would report)."""
  proc = subprocess.run([sys.executable, '-c', _RESTORES, *map(os.path.abspath, paths)],
                        check=True, capture_output=True, text=True, timeout=300,
                        env={**os.environ, 'JAX_PLATFORMS': 'cpu'})
  return json.loads(proc.stdout.strip().splitlines()[-1])


def test_inspect_reads_metadata_not_arrays(capsys, monkeypatch, orbax_output):
  out, tree = orbax_output
  def no_restore(*args, **kwargs):
    raise AssertionError('inspect restored the arrays')
  monkeypatch.setattr(ocp.StandardCheckpointer, 'restore', no_restore)
  code, stdout, err = _utils.run_cli(capsys, 'inspect', str(out), '--json')
  assert code == 0, err
  info = json.loads(stdout)
  leaves = {leaf['path']: (leaf['shape'], leaf['dtype']) for leaf in info['leaves']}
  assert leaves['/params/kernel'] == ([64, 64], 'float32')
  assert leaves['/params/bias'] == ([3], 'float32')
  assert info['step'] == 5 and info['carried'] == ['epoch'] and info['param_count'] == 64 * 64 + 3
  assert any(note.startswith('orbax data: every file its OCDBT manifest names (')
             for note in info['notes']), info['notes']
  assert leaves['/epoch'] == ([], 'int32')


def _remove_process_data(out):
  for name in os.listdir(out):
    if name.startswith('ocdbt.process_'):
      shutil.rmtree(out / name)
  return 'ocdbt.process_0/d/'


def _truncate_largest(out):
  files = [os.path.join(root, f) for root, _, names in os.walk(out) for f in names
           if os.sep + 'd' + os.sep in os.path.join(root, f) + os.sep]
  largest = max(files, key=os.path.getsize)
  with open(largest, 'r+b') as f:
    f.truncate(os.path.getsize(largest) // 2)
  return os.path.relpath(largest, out)


def _remove_root_manifest(out):
  os.remove(out / 'manifest.ocdbt')
  return 'manifest.ocdbt'


def _intact(out):
  return None


DAMAGES = {
    'process data removed': (_remove_process_data,
                             'its OCDBT manifest names is missing; plain orbax cannot restore it.'),
    'data file truncated': (_truncate_largest, 'truncated; plain orbax cannot restore it.'),
    'manifest removed': (_remove_root_manifest,
                         'is missing (it has ocdbt.process_0/); plain orbax cannot restore'),
}


@pytest.fixture(scope='module')
def damaged(orbax_output, tmp_path_factory):
  """``{damage: (folder, the file it names, whether plain orbax restores it)}``, and an intact
  copy as ``'intact'``."""
  tmp = tmp_path_factory.mktemp('damaged')
  folders = {}
  for key, damage in [('intact', _intact)] + [(k, d) for k, (d, _) in DAMAGES.items()]:
    out = tmp / key.replace(' ', '-')
    shutil.copytree(orbax_output[0], out)
    folders[key] = (out, damage(out))
  verdicts = _restores(*(out for out, _ in folders.values()))
  return {key: (out, name, ok) for (key, (out, name)), ok in zip(folders.items(), verdicts)}


@pytest.mark.parametrize('key', sorted(DAMAGES))
def test_a_folder_orbax_cannot_restore_is_refused(capsys, damaged, key):
  out, name, restores = damaged[key]
  assert not restores   # plain orbax's own verdict
  code, stdout, err = _utils.run_cli(capsys, 'inspect', str(out))
  assert code == 2 and err.count('\n') == 1, err
  assert f"'{out}'" in err and name in err and DAMAGES[key][1] in err, err
  assert 'converted TrainState' not in stdout
  # with --json the same line is the JSON error on stdout, and stderr stays empty
  code, stdout, err = _utils.run_cli(capsys, 'inspect', str(out), '--json')
  assert code == 2 and not err, err
  failure = json.loads(stdout)
  assert failure['code'] == 2, stdout
  assert f"'{out}'" in failure['error'] and name in failure['error'], stdout
  assert DAMAGES[key][1] in failure['error'], stdout


def test_an_intact_copy_restores_and_inspects(capsys, damaged):
  out, _, restores = damaged['intact']
  assert restores
  assert _utils.run_cli(capsys, 'inspect', str(out))[0] == 0


# ----------------------------------------------------------------------------- 1 GB

# What the child's ``inspect`` did, counted rather than timed (a time moves with the machine's
# load): its peak memory and the bytes its read calls returned. The peak is VmHWM: getrusage's
# ru_maxrss keeps, across exec, the peak of the process it was forked from (this test's, which
# held the arrays it wrote). The bytes are /proc/self/io's rchar, which counts every read and
# pread of every thread (tensorstore reads the data files from its own threads), cached or not;
# reading through a memory map would not count there, but would raise the peak.
_MEASURE = '''
import sys
from flax_optim_compat import convert

def proc_self(name, key):
  with open('/proc/self/' + name) as f:
    return next(int(line.split()[1]) for line in f if line.startswith(key + ':'))

before = proc_self('io', 'rchar')
info = convert.inspect(sys.argv[1])
read = proc_self('io', 'rchar') - before
print(read, proc_self('status', 'VmHWM') * 1024, info.total_bytes)
'''


def _measure(path):
  out = subprocess.run([sys.executable, '-c', _MEASURE, str(path)], capture_output=True,
                       text=True, check=True, timeout=600).stdout.split()
  return int(out[0]), int(out[1]), int(out[2])


@pytest.mark.skipif(not os.path.exists('/proc/self/io'), reason='reads Linux\'s /proc/self/io')
@pytest.mark.skipif(os.environ.get('FLAX_OPTIM_COMPAT_LARGE_TESTS') != '1',
                    reason='a 1 GB orbax output: tools/lanes.sh runs it '
                           '(FLAX_OPTIM_COMPAT_LARGE_TESTS=1)')
def test_inspect_reads_and_memory_do_not_grow_with_the_arrays(tmp_path):
  measured = {}
  for name, shape in (('small', (64, 64)), ('large', (16384, 16384))):   # 16 KB, 1 GiB
    _legacy(tmp_path / f'{name}.msgpack', shape)
    convert.to_orbax(str(tmp_path / f'{name}.msgpack'), _gd(), tmp_path / name)
    os.remove(tmp_path / f'{name}.msgpack')
    measured[name] = _measure(tmp_path / name)
  (small_read, small_rss, small_bytes), (large_read, large_rss, large_bytes) = (
      measured['small'], measured['large'])
  assert large_bytes > 1 << 30 and small_bytes < 1 << 15
  # Reading the arrays would read 1 GiB more and take 1 GiB more memory; metadata does neither
  # (the small case's own reads are modules it imports late and orbax's metadata files).
  assert large_read - small_read < 64 << 20, (small_read, large_read)
  assert large_rss - small_rss < 64 << 20, (small_rss, large_rss)
