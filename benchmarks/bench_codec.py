"""The checkpoint codec's reader against ``msgpack.Unpacker``: guarantees, speed, memory.

Run:  python benchmarks/bench_codec.py [--gb 1.0] [--leaf-mb 64] [--repeats 3] [--dir /tmp]

Two readers of flax's msgpack encoding:

* ``ours``      ``_checkpoint._codec.decode`` (the hand-written streaming reader);
* ``unpacker``  the library's way: ``msgpack.Unpacker(file, ext_hook=..., max_buffer_size=...,
  max_bin_len=..., max_ext_len=..., strict_map_key=False)`` reading the file with streaming
  ``read``s, flax's records decoded in the ``ext_hook`` (``[shape, dtype, bytes]`` checked
  there, the array a view of the ext's bytes), the size limits set to the file's size, the
  offset from ``tell()``.

1. **Hostile corpus** (``tests/_hostile.py``: every bad record and value at every path of a
   small tree, and seeded byte flips and truncations of it): for each reader, how many inputs
   are refused, and how many of the refusals name the path inside the file and a byte offset
   inside the record (``unpacker``'s ``tell()`` only moves between top-level objects: a
   checkpoint is one).
2. **A ~1 GB file** (float32 leaves of ``--leaf-mb``, written under ``--dir`` and deleted
   after): seconds and peak resident memory added (Linux ``VmHWM``, reset before the read),
   each read in its own fresh process, median of ``--repeats``, for NumPy and jax leaves.

Results from this script are written into ``_codec``'s module docstring.
"""
import argparse
import io
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import msgpack
import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


# ----------------------------------------------------------------------------- the readers

class UnpackerError(ValueError):
  pass


def _ndarray(data, code):
  """flax's array record ``packb((shape, dtype name, bytes))`` from an ext's payload."""
  # Only the head goes to an Unpacker (feed copies): [shape, dtype] take at most ~700 bytes.
  inner = msgpack.Unpacker(max_bin_len=0, max_array_len=65, max_str_len=64, max_ext_len=0,
                           max_map_len=0, raw=False)
  inner.feed(memoryview(data)[:4096])
  try:
    if inner.read_array_header() != 3:
      raise UnpackerError('an array record that is not [shape, dtype, bytes]')
    shape, dtype = inner.unpack(), inner.unpack()
    header_end = inner.tell()
  except (ValueError, msgpack.OutOfData, msgpack.ExtraData) as e:
    raise UnpackerError(f'an array record that is not [shape, dtype, bytes] ({e})') from None
  if (not isinstance(shape, list) or len(shape) > 64
      or not all(type(d) is int and d >= 0 for d in shape)):  # pylint: disable=unidiomatic-typecheck
    raise UnpackerError(f'shape {shape!r:.40} is not a list of non-negative ints')
  try:
    dtype = np.dtype('bfloat16' if dtype == 'bfloat16' else dtype)
  except TypeError:
    raise UnpackerError(f'unknown dtype {dtype!r:.40}') from None
  if dtype.kind not in 'biufcV' or dtype.fields or dtype.shape or not dtype.isnative:
    raise UnpackerError(f'dtype {dtype} is not numeric')
  view = memoryview(data)[header_end:]
  if len(view) < 1 or view[0] not in (0xc4, 0xc5, 0xc6):
    raise UnpackerError('the data is not a byte string')
  width = 1 << (view[0] - 0xc4)
  size = int.from_bytes(view[1:1 + width], 'big')
  if size != len(view) - 1 - width or size != math.prod(shape) * dtype.itemsize:
    raise UnpackerError(f'shape {tuple(shape)} x {dtype} does not match {size} bytes')
  array = np.frombuffer(view[1 + width:], dtype).reshape(shape)
  return array[()] if code == 3 else array


def unpacker_decode(f, total, mode='numpy'):
  """The state dict of a flax msgpack file read with ``msgpack.Unpacker``."""
  import jax  # pylint: disable=import-outside-toplevel

  def ext_hook(code, data):
    if code == 2:
      real, imag = msgpack.unpackb(data)
      return complex(real, imag)
    if code not in (1, 3):
      raise UnpackerError(f'an ext record of code {code}')
    array = _ndarray(data, code)
    if mode == 'jax' and code == 1:
      return jax.device_put(array)
    return array

  unpacker = msgpack.Unpacker(f, ext_hook=ext_hook, raw=False, strict_map_key=False,
                              max_buffer_size=max(total, 1), max_bin_len=total,
                              max_str_len=total, max_ext_len=total, max_array_len=total,
                              max_map_len=total, read_size=max(1, min(1 << 20, total)))
  try:
    tree = unpacker.unpack()
  except UnpackerError as e:
    raise UnpackerError(f'{e} (byte offset {unpacker.tell()})') from None
  except (ValueError, TypeError, msgpack.OutOfData, msgpack.FormatError,
          msgpack.StackError) as e:
    raise UnpackerError(f'{type(e).__name__}: {e} (byte offset {unpacker.tell()})') from None
  if not isinstance(tree, dict):
    raise UnpackerError('not a dict')
  return tree


def ours_decode(f, total, mode='numpy'):
  from flax_optim_compat._checkpoint import _codec  # pylint: disable=import-outside-toplevel
  return _codec.decode(f, "'file'", mode=mode, total=total)


READERS = {'ours': ours_decode, 'unpacker': unpacker_decode}


# ----------------------------------------------------------------------------- hostile corpus

def _corpus():
  """``[(description, bytes, path of the bad node or None)]``."""
  from tests import _hostile  # pylint: disable=import-outside-toplevel
  tree = {'target': {'dense': {'kernel': np.arange(6, dtype=np.float32).reshape(2, 3),
                               'bias': np.zeros(3, np.float32)}},
          'state': {'step': 3, 'param_states': {'dense': {
              'kernel': {'momentum': np.ones((2, 3), np.float32)},
              'bias': {'momentum': np.ones(3, np.float32)}}}}}
  cases = []
  for table in (_hostile.BAD_RECORDS,):
    for what, value in sorted(table.items()):
      for path in (('target', 'dense', 'bias'), ('state', 'param_states', 'dense', 'kernel',
                                                 'momentum')):
        bad = _hostile._replace(tree, path, value)  # pylint: disable=protected-access
        cases.append((f'{what} at /{"/".join(path)}', _hostile.pack(bad), path))
  good = _hostile.pack(tree)
  for description, _, data in _hostile.mutations({'tree': (good, tree)}, seed=0, count=400):
    if 'bytes flipped' in description or 'truncated' in description:
      cases.append((description, data, None))
  return cases


def hostile():
  cases = _corpus()
  report = {}
  for name, read in READERS.items():
    refused = with_path = with_offset = 0
    for _, data, path in cases:
      try:
        read(io.BytesIO(data), len(data))
      except Exception as e:  # pylint: disable=broad-except
        refused += 1
        message = str(e)
        with_path += path is not None and '/' + '/'.join(path) in message
        found = re.search(r'byte offset (\d+)', message)
        with_offset += bool(found and int(found[1]) > 0)
    report[name] = {'cases': len(cases), 'path_known': sum(p is not None for *_, p in cases),
                    'refused': refused, 'path_named': with_path, 'offset_named': with_offset}
  return report


# ----------------------------------------------------------------------------- 1 GB file

def _write_file(path, gb, leaf_mb):
  from flax_optim_compat._checkpoint import _codec  # pylint: disable=import-outside-toplevel
  n_leaves = max(1, round(gb * 1e9 / (leaf_mb * 1e6)))
  leaf = np.random.default_rng(0).standard_normal(leaf_mb * 250_000, np.float32)
  tree = {'step': np.int32(1), 'target': {f'w{i:03d}': leaf for i in range(n_leaves)}}
  with open(path, 'wb') as f:
    _codec.encode(f, tree)
  return os.path.getsize(path)


def _worker(reader, mode, path):
  with open('/proc/self/clear_refs', 'w') as f:  # reset VmHWM
    f.write('5')

  def kib(field):
    with open('/proc/self/status') as f:
      return next(int(line.split()[1]) for line in f if line.startswith(field + ':'))

  import jax  # pylint: disable=import-outside-toplevel,unused-import
  from flax_optim_compat._checkpoint import _codec  # pylint: disable=import-outside-toplevel,unused-import
  base = kib('VmRSS')
  with open('/proc/self/clear_refs', 'w') as f:
    f.write('5')
  total = os.path.getsize(path)
  start = time.perf_counter()
  with open(path, 'rb') as f:
    tree = READERS[reader](f, total, mode)
  seconds = time.perf_counter() - start
  assert len(tree['target']) > 0
  print(json.dumps({'seconds': seconds, 'added_bytes': (kib('VmHWM') - base) * 1024}))


def big_file(gb, leaf_mb, repeats, directory):
  fd, path = tempfile.mkstemp(dir=directory, suffix='.msgpack')
  os.close(fd)
  try:
    size = _write_file(path, gb, leaf_mb)
    out = {'file_bytes': size}
    for mode in ('numpy', 'jax'):
      for reader in READERS:
        runs = [json.loads(subprocess.run(
            [sys.executable, __file__, '--worker', reader, mode, path], check=True,
            capture_output=True, text=True, cwd=REPO).stdout.splitlines()[-1])
                for _ in range(repeats)]
        out[f'{reader} {mode}'] = {
            'seconds': statistics.median(r['seconds'] for r in runs),
            'added_x_file': statistics.median(r['added_bytes'] for r in runs) / size}
    return out
  finally:
    os.remove(path)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--gb', type=float, default=1.0)
  parser.add_argument('--leaf-mb', type=int, default=64)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--dir', default=tempfile.gettempdir())
  parser.add_argument('--worker', nargs=3, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.worker:
    _worker(*args.worker)
    return
  print(json.dumps({'msgpack': msgpack.version, 'hostile': hostile(),
                    'big_file': big_file(args.gb, args.leaf_mb, args.repeats, args.dir)},
                   indent=1))


if __name__ == '__main__':
  main()
