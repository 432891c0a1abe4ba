#!/usr/bin/env python3
"""Which of the dotted names a corpus uses no longer resolve on the installed jax / flax.

Reads ``scan.py ROOT --refs`` output (name, #programs, #files) on stdin and tries each name:
import the longest importable module prefix, then getattr the rest. Prints the names that
fail, with the error. Run it with the alias hook off, so that ``flax.optim`` counts as gone:

    python tools/corpus/scan.py ROOT --refs | \
      FLAX_OPTIM_COMPAT_ALIAS=0 python tools/corpus/probe_names.py
"""
import importlib
import sys
import warnings


def probe(dotted):
  parts = dotted.split('.')
  for i in range(len(parts), 0, -1):
    mod = '.'.join(parts[:i])
    try:
      obj = importlib.import_module(mod)
    except ImportError:
      continue
    except Exception as e:  # noqa: BLE001 - a module that fails to import counts as gone
      return f'{type(e).__name__}: {e}'
    for j, attr in enumerate(parts[i:]):
      try:
        with warnings.catch_warnings(record=True) as w:
          warnings.simplefilter('always')
          obj = getattr(obj, attr)
      except AttributeError as e:
        return f'AttributeError: {".".join(parts[:i + j])} has no {attr}'
      dep = [x for x in w if issubclass(x.category, DeprecationWarning)]
      if dep:
        return f'deprecated: {str(dep[0].message).splitlines()[0][:100]}'
    return None
  return 'ImportError: no module ' + parts[0]


def main():
  warnings.simplefilter('ignore')
  seen = set()
  for line in sys.stdin:
    name, *counts = line.rstrip('\n').split('\t')
    top = name.split('.')[0]
    if top not in ('jax', 'flax', 'optax', 'numpy') or name in seen:
      continue
    seen.add(name)
    err = probe(name)
    if err:
      print('\t'.join([name, *counts, err]))


if __name__ == '__main__':
  main()
