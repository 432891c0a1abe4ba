"""Idioms of research programs ``migrate`` met outside its own examples: what it rewrites
(proven both ways by the rule examples it names) and what it refuses, with the limit named."""
import pytest

pytest.importorskip('libcst')

from flax_optim_compat._migrate import migrate_source  # pylint: disable=g-import-not-at-top

_PRELUDE = 'import jax.numpy as jnp\nfrom flax import optim\n\np = {"w": jnp.ones(3)}\n'


def _refusals(source):
  new, report = migrate_source(source, 'train.py')
  return new, [(r.line, r.code, r.message) for r in report.records if r.status == 'refused']


@pytest.mark.parametrize('use', [
    "kw = {'beta1': 0.8}\nkw['beta2'] = 0.9\n",            # changed after its assignment
    "kw = {'beta1': 0.8}\nkw.update(beta2=0.9)\n",         # changed through a method
    "kw = {'beta1': 0.8}\nprint(kw)\n",                    # read elsewhere: may be changed
    "kw = {'beta1': 0.8}\nkw = {'beta1': 0.7}\n",          # assigned twice
    "kw = {**{'beta1': 0.8}}\n",                           # not a plain literal
    "kw = dict(other, beta1=0.8)\n",                       # keys known only at run time
])
def test_keywords_that_can_change_or_are_not_literal_stay_refused_naming_the_dict(use):
  source = _PRELUDE + 'other = {}\n' + use + 'opt = optim.Adam(0.1, **kw).create(p)\n'
  new, refused = _refusals(source)
  assert 'optax' not in new
  (line, code, message), = refused
  assert code == 'FOM110' and source.splitlines()[line - 1].startswith('opt = ')
  assert message.startswith('optim.Adam(0.1, **kw): the keywords of **kw are known only at '
                            'run time'), message


def test_a_keyword_given_twice_is_refused():
  source = _PRELUDE + "kw = {'beta1': 0.8}\nopt = optim.Adam(0.1, beta1=0.7, **kw).create(p)\n"
  _, refused = _refusals(source)
  assert [c for _, c, _ in refused] == ['FOM110'], refused


def test_a_dict_assigned_once_and_only_unpacked_is_read_literal_by_literal():
  source = _PRELUDE + (
      "scale = 2.0\nkw = {'beta1': 0.8, 'weight_decay': 1e-3 * scale}\n"
      'def make(params):\n  return optim.Adam(0.1, **kw).create(params)\n\nopt = make(p)\n')
  new, refused = _refusals(source)
  assert refused == []
  assert ("optax.adamw(learning_rate=0.1, b1=0.8, b2=0.999, eps=1e-08, "
          "weight_decay=kw['weight_decay']") in new, new
