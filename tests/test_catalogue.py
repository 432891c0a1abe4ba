"""The catalogue of cases covers every optimizer, and the committed fixtures are its cases.

A golden file made from other inputs than the catalogue's (a case edited without regenerating)
fails here with the case's name, before any trajectory is compared.
"""
import ast
import dataclasses
import inspect
import pathlib

import numpy as np
import pytest
from flax import serialization

import flax_optim_compat as optim
from flax_optim_compat import _layouts
from tests import _utils
from tests import catalogue
from tests import checkpoint_specs
from tests import oracle_specs
from tests import pmap_specs

# ReplicatedOptimizer is what `Optimizer.replicate()` wraps a def in: the catalogue's
# 'replicated' checkpoint cases and pmap routes cover it.
PUBLIC_DEFS = sorted(name for name in optim.__all__
                     if inspect.isclass(getattr(optim, name))
                     and issubclass(getattr(optim, name), optim.OptimizerDef)
                     and name not in ('OptimizerDef', 'ReplicatedOptimizer'))


def _entry(name):
  return next(entry for entry in catalogue.CATALOGUE if entry.name == name)


def test_every_public_optimizer_has_an_entry():
  assert 'Adam' in PUBLIC_DEFS and 'MultiOptimizer' in PUBLIC_DEFS  # the list sees the defs
  assert sorted(e.name for e in catalogue.CATALOGUE if e.name in optim.__all__) == PUBLIC_DEFS


@pytest.mark.parametrize('name', PUBLIC_DEFS)
def test_every_optimizer_has_every_kind_of_case(name):
  catalogue.check_entry(_entry(name))


def test_an_entry_without_oracle_cases_is_caught():
  adam = _entry('Adam')
  with pytest.raises(AssertionError, match=r"Adam: no \['pmap'\] case"):
    catalogue.check_entry(dataclasses.replace(adam, pmap={}))
  with pytest.raises(AssertionError, match=r"flax 0.5.3 never had it.*\['trajectories', "
                                           r"'checkpoints', 'pmap'\]"):
    catalogue.check_entry(dataclasses.replace(adam, in_flax_0_5_3=False))


def _assert_same_inputs(actual, expected, path):
  if isinstance(expected, dict):
    assert isinstance(actual, dict) and sorted(actual) == sorted(expected), (
        f'{path}: keys {sorted(actual) if isinstance(actual, dict) else actual} != '
        f'{sorted(expected)}')
    for key in expected:
      _assert_same_inputs(actual[key], expected[key], f'{path}/{key}')
  elif isinstance(expected, np.ndarray):
    actual = np.asarray(actual)
    assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape), path
    assert actual.tobytes() == expected.tobytes(), f'{path}: values differ'
  else:
    assert type(actual) is type(expected) and actual == expected, (
        f'{path}: {actual!r} != {expected!r}')


def _as_stored(tree):
  """``tree`` as a fixture stores it (msgpack: tuples become lists, scalars numpy)."""
  return serialization.msgpack_restore(serialization.msgpack_serialize(tree))


def test_trajectory_fixtures_are_the_catalogues_families():
  assert _utils.fixture_names('trajectories') == sorted(catalogue.TRAJECTORY_FAMILIES)


@pytest.mark.parametrize('family', sorted(catalogue.TRAJECTORY_FAMILIES))
def test_trajectory_fixture_inputs_are_the_catalogues(family):
  stored = _utils.load_fixture('trajectories', f'{family}.msgpack')['cases']
  made = _as_stored(oracle_specs.make_cases(family))
  inputs = {name: {k: v for k, v in case.items() if k != 'expected'}
            for name, case in stored.items()}
  _assert_same_inputs(made, inputs, family)


def test_checkpoint_fixture_inputs_are_the_catalogues():
  stored = _utils.load_fixture('checkpoints', 'expected.msgpack')
  assert sorted(stored) == sorted(catalogue.CHECKPOINTS)
  for name in stored:
    _assert_same_inputs(_as_stored(checkpoint_specs.make_case(name)), stored[name]['case'], name)


def test_pmap_fixture_inputs_are_the_catalogues():
  assert _utils.fixture_names('pmap') == sorted(catalogue.PMAP)
  for name in catalogue.PMAP:
    _assert_same_inputs(_as_stored(pmap_specs.make_case(name)),
                        _utils.load_fixture('pmap', f'{name}.msgpack')['case'], name)


def test_an_edited_case_is_caught():
  stored = _utils.load_fixture('trajectories', 'Adagrad.msgpack')['cases']
  made = _as_stored(oracle_specs.make_cases('Adagrad'))
  name = next(iter(made))
  made[name]['optimizer']['kwargs']['learning_rate'] = 0.2
  inputs = {n: {k: v for k, v in c.items() if k != 'expected'} for n, c in stored.items()}
  with pytest.raises(AssertionError, match='learning_rate'):
    _assert_same_inputs(made, inputs, 'Adagrad')


def test_convert_fixture_inputs_are_the_catalogues():
  stored = _utils.load_fixture('convert', 'expected.msgpack')
  assert sorted(stored) == sorted(catalogue.CONVERT)
  for name, case in catalogue.CONVERT.items():
    _assert_same_inputs(stored[name]['optimizer'], _as_stored(case.spec), name)


# ----------------------------------------------------------------------------- one place per name
# A new legacy-style optimizer = its file, the `__init__` lines (its import, `__all__`, its place
# in `register_classes`) and one catalogue entry; every other list of optimizers derives from
# those.

PACKAGE_DIR = pathlib.Path(optim.__file__).parent
REPO = PACKAGE_DIR.parent


@pytest.mark.parametrize('name', catalogue.BUILTINS)
def test_every_place_a_builtin_name_must_appear(name):
  cls = getattr(optim, name)
  # 1. its file
  module = cls.__module__.split('.')[-1]
  assert cls.__module__ == f'flax_optim_compat.{module}'
  assert (PACKAGE_DIR / f'{module}.py').is_file()
  # 2. the __init__ lines
  init = (PACKAGE_DIR / '__init__.py').read_text(encoding='utf-8')
  assert f'from .{module} import {name} as {name}\n' in init
  assert name in optim.__all__
  assert name in _layouts.optimizer_names()
  # 3. one catalogue entry, with every kind of case (see the tests above)
  assert [entry.name for entry in catalogue.CATALOGUE].count(name) == 1


def test_the_package_registers_the_catalogues_classes_in_its_order():
  assert _layouts.optimizer_names() == catalogue.LAYOUT_CLASSES
  names = {name for _, name in _layouts.known_layouts()}
  for shared in catalogue.SAME_LAYOUT:
    assert ', '.join(shared[:-1]) + ' or ' + shared[-1] in names


def _lists_of_builtins(path):
  """``(line, names)`` of every literal list / tuple / set / dict naming 5 or more built-ins."""
  found = []
  for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
    if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
      names = set()
      for elt in node.keys if isinstance(node, ast.Dict) else node.elts:
        if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
          names.update(n for n in catalogue.BUILTINS
                       if elt.value == n or elt.value.startswith((f'{n}-', f'{n}(')))
        elif isinstance(elt, (ast.Name, ast.Attribute)):
          names.update({getattr(elt, 'id', None), getattr(elt, 'attr', None)}
                       & set(catalogue.BUILTINS))
      if len(names) >= 5:
        found.append((node.lineno, sorted(names)))
  return found


def test_no_other_per_optimizer_list():
  allowed = {REPO / 'tests' / 'catalogue.py', PACKAGE_DIR / '__init__.py'}
  offenders = []
  for folder in ('flax_optim_compat', 'tests', 'tools', 'benchmarks'):
    for path in sorted((REPO / folder).rglob('*.py')):
      if path not in allowed:
        offenders += [f'{path.relative_to(REPO)}:{line} {names}'
                      for line, names in _lists_of_builtins(path)]
  assert not offenders, ('lists of optimizers outside tests/catalogue.py and the package '
                         f'__init__ (derive them from the catalogue): {offenders}')


def test_a_second_list_is_caught(tmp_path):
  five = catalogue.BUILTINS[:5]
  copy = tmp_path / 'x.py'
  copy.write_text('\n\nCASES = {' + ', '.join(f'"{n}-case": 1' for n in five) + '}\n')
  assert _lists_of_builtins(copy) == [(3, sorted(five))]
  copy.write_text('CASES = {' + ', '.join(f'"{n}-case": 1' for n in five[:4]) + '}\n')
  assert _lists_of_builtins(copy) == []
