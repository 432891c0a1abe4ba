"""The wheel and sdist a release would upload: their files and their metadata.

Both are built once per test run, offline, from a copy of the files a build reads
(``tests/_utils.built_dists``, shared with test_import_alias.py: setuptools>=64 and wheel, which
the `test` extra brings, build without the package index).
"""
import configparser
import email
import re
import tarfile
import zipfile

import pytest

from tests import _utils

REPO = _utils.REPO
DOCS = tuple(name for name in _utils.BUILD_INPUTS if name.startswith('docs/'))
BUILD_INPUTS = _utils.BUILD_INPUTS


@pytest.fixture(scope='module')
def dists():
  if not _utils.offline_build_possible():
    pytest.skip('needs setuptools>=64 and wheel (the `test` extra) to build offline')
  return _utils.built_dists()


def _wheel_metadata(wheel):
  with zipfile.ZipFile(wheel) as zf:
    name, = [n for n in zf.namelist() if n.endswith('.dist-info/METADATA')]
    return email.message_from_string(zf.read(name).decode('utf-8'))


def test_wheel_files(dists):
  wheel, _ = dists
  with zipfile.ZipFile(wheel) as zf:
    names = set(zf.namelist())
  modules = {f'flax_optim_compat/{p.name}' for p in (REPO / 'flax_optim_compat').glob('*.py')}
  assert modules <= names, sorted(modules - names)
  assert {'_flax_optim_compat_alias.py', 'flax_optim_compat_alias.pth'} <= names
  top_level = {n.split('/')[0] for n in names}
  info, = [t for t in top_level if t.endswith('.dist-info')]
  # Only the package, the alias hook and the metadata: no tests/, tools/ or benchmarks/.
  assert top_level == {'flax_optim_compat', '_flax_optim_compat_alias.py',
                       'flax_optim_compat_alias.pth', info}, sorted(top_level)


def test_wheel_metadata(dists):
  meta = _wheel_metadata(dists[0])
  assert meta['Requires-Python'] == '>=3.10'
  assert meta['License'] == 'Apache-2.0' or meta['License-Expression'] == 'Apache-2.0'
  classifiers = set(meta.get_all('Classifier'))
  for minor in (10, 11, 12, 13):
    assert f'Programming Language :: Python :: 3.{minor}' in classifiers
  assert 'Topic :: Scientific/Engineering :: Artificial Intelligence' in classifiers
  assert not [c for c in classifiers if c.startswith('License ::')]
  assert meta.get_all('Project-URL')
  # Every dependency has a floor (the versions tools/lanes.sh installs for the `floors` lane).
  cfg = configparser.ConfigParser()
  cfg.read(REPO / 'setup.cfg')
  declared = [r for r in cfg['options']['install_requires'].splitlines() if r.strip()]
  requires = [r for r in meta.get_all('Requires-Dist') if 'extra ==' not in r]
  assert sorted(requires) == sorted(declared)
  assert all(re.fullmatch(r'[A-Za-z0-9_.-]+>=[0-9.]+', r) for r in requires), requires


def test_long_description_carries_the_docs(dists):
  """The index shows the README, then every docs/ page; relative links (dead there) are text."""
  description = _wheel_metadata(dists[0]).get_payload()
  readme_title = (REPO / 'README.md').read_text(encoding='utf-8').splitlines()[0]
  assert description.startswith(readme_title)
  starts = []
  for name in DOCS:
    title = (REPO / name).read_text(encoding='utf-8').splitlines()[0]
    assert title.startswith('# ') and description.count(f'\n{title}\n') == 1, name
    starts.append(description.index(f'\n{title}\n'))
  assert starts[DOCS.index('docs/README.md')] == min(starts)  # the task list first
  assert 'docs/differences.md' in (REPO / 'README.md').read_text(encoding='utf-8')
  assert not re.findall(r'\]\((?![a-z]+:)', description), 'a relative link on the index page'
  assert '[docs/differences.md]' not in description and 'docs/differences.md' in description


def test_sdist_has_what_setup_py_reads(dists):
  _, sdist = dists
  with tarfile.open(sdist) as tf:
    names = {n.split('/', 1)[1] for n in tf.getnames() if '/' in n}
  assert set(BUILD_INPUTS) <= names, sorted(set(BUILD_INPUTS) - names)
