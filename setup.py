"""Build script; the metadata lives in setup.cfg.

Besides the package, every install puts ``flax_optim_compat_alias.pth`` into site-packages.
Python runs its one line at start-up; it imports ``_flax_optim_compat_alias`` (a top-level
module of this distribution), which registers the tiny finder that makes ``flax.optim``
resolve to ``flax_optim_compat`` when flax has no ``optim`` of its own (set
``FLAX_OPTIM_COMPAT_ALIAS=0`` to turn it off). How the file gets there:

* regular install / wheel: ``build_py`` writes it at the top of ``build_lib``, so it is a
  top-level file of the wheel and lands in site-packages (and in RECORD: ``pip uninstall``
  removes it);
* editable install, PEP 660 (setuptools >= 64): setuptools builds the editable wheel from the
  directory the ``install`` command targets and ignores ``build_lib``, so in ``editable_mode``
  ``build_py`` writes the file there;
* editable install, legacy ``setup.py develop``: written next to the ``.egg-link``.

The long description (the project page on the package index) is README.md followed by the pages
of docs/, in the order docs/README.md lists them: the index cannot follow relative links, so each
relative link becomes its text (the pages are further down the same page). MANIFEST.in puts docs/
in the sdist, so a wheel built from the sdist is the same.
"""
import os
import re

import setuptools
from setuptools.command.build_py import build_py as _build_py
from setuptools.command.develop import develop as _develop

PTH_NAME = 'flax_optim_compat_alias.pth'
# Sorted after setuptools' `__editable__.*.pth` (site processes .pth files in name order), so
# in an editable install the module is importable when this line runs. The try/except keeps
# start-up quiet if the source tree of an editable install has gone away.
PTH_CONTENT = ('import sys; exec("try:\\n    import _flax_optim_compat_alias\\n'
               'except ImportError:\\n    pass")\n')


def _write_pth(cmd, directory):
  path = os.path.join(directory, PTH_NAME)
  if not cmd.dry_run:
    os.makedirs(directory, exist_ok=True)
    with open(path, 'w', encoding='utf-8') as f:
      f.write(PTH_CONTENT)
  return path


class build_py(_build_py):  # pylint: disable=invalid-name
  """``build_py`` that also emits the alias ``.pth`` (see the module docstring)."""

  def run(self):
    super().run()
    if getattr(self, 'editable_mode', False):
      # The unpacked editable wheel: setuptools points `install_lib` there.
      target_dir = self.get_finalized_command('install').install_lib
    else:
      target_dir = self.build_lib
    _write_pth(self, target_dir)

  def get_outputs(self, include_bytecode=1):
    outputs = super().get_outputs(include_bytecode)
    if not getattr(self, 'editable_mode', False):
      outputs.append(os.path.join(self.build_lib, PTH_NAME))
    return outputs


class develop(_develop):  # pylint: disable=invalid-name
  """Legacy editable install (``setup.py develop``, pip's fallback before PEP 660)."""

  def run(self):
    super().run()
    if not getattr(self, 'uninstall', False):
      _write_pth(self, self.install_dir)


# `[text](target)` where target is not a URL (`https:`, `mailto:`, ...).
_RELATIVE_LINK = re.compile(r'\[([^\]]+)\]\((?![a-z]+:)[^)]*\)')


def doc_pages(here):
  """docs/*.md, docs/README.md first, then the pages in the order it links them."""
  docs = os.path.join(here, 'docs')
  if not os.path.isdir(docs):
    return []  # a partial copy of the tree: the README alone
  with open(os.path.join(docs, 'README.md'), encoding='utf-8') as f:
    listed = re.findall(r'\]\(([\w-]+\.md)', f.read())
  pages = sorted(name for name in os.listdir(docs) if name.endswith('.md'))
  order = ['README.md'] + [name for name in dict.fromkeys(listed) if name in pages]
  return [os.path.join(docs, name) for name in order + [n for n in pages if n not in order]]


def long_description(here=os.path.dirname(os.path.abspath(__file__))):
  """README.md, then the docs/ pages, with relative links made plain text."""
  parts = []
  for path in [os.path.join(here, 'README.md')] + doc_pages(here):
    with open(path, encoding='utf-8') as f:
      parts.append(_RELATIVE_LINK.sub(lambda m: m.group(1), f.read()).rstrip())
  return '\n\n---\n\n'.join(parts) + '\n'


setuptools.setup(
    cmdclass={'build_py': build_py, 'develop': develop},
    long_description=long_description(),
    long_description_content_type='text/markdown',
)
