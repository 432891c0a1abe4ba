"""The pip command that adds an extra (LibCST for ``migrate``) to this package as it is installed.

The package is on no index: from a clone it is installed from its folder (``pip install
'.[migrate]'``), and pip records that folder in the distribution's ``direct_url.json`` (PEP 610:
``{"url": "file:///...", "dir_info": {"editable": true}}``). Only an installation without that
record came from an index, where ``pip install 'flax_optim_compat[migrate]'`` works.
"""
import importlib.metadata
import json
import os
import shlex
import sys
import urllib.parse
import urllib.request
from typing import Optional

_NAME = 'flax_optim_compat'
_SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pip_command(extra: str) -> str:
  """``python -m pip install ...`` adding ``extra`` to this installation, run from anywhere."""
  try:
    dist = importlib.metadata.distribution(_NAME)
  except importlib.metadata.PackageNotFoundError:
    dist = None
  direct = None
  if dist is not None:
    try:
      direct = json.loads(dist.read_text('direct_url.json') or 'null')
    except ValueError:
      direct = None
  return command_for(dist is not None, direct, extra, source=_SOURCE, cwd=os.getcwd(),
                     python=sys.executable)


def command_for(installed: bool, direct_url: Optional[dict], extra: str, *, source: str,
                cwd: str, python: str) -> str:
  """The command for an installation described by ``installed`` and its ``direct_url``.

  Args:
    installed: whether pip knows the distribution (False: run from a clone on ``sys.path``).
    direct_url: its ``direct_url.json`` (None: installed from an index).
    extra: the extra to add, e.g. ``'migrate'``.
    source: the folder holding the package's ``setup.py`` when it runs from a clone.
    cwd: where the user is (a folder that is the current one is written ``.``).
    python: the interpreter that runs the package (its pip installs into its environment).
  """
  pip = f'{shlex.quote(python)} -m pip install'
  if installed and direct_url is None:
    return f'{pip} {shlex.quote(f"{_NAME}[{extra}]")}'
  editable = False
  if installed:
    url = str(direct_url.get('url', ''))
    if not url.startswith('file:'):
      vcs = direct_url.get('vcs_info', {}).get('vcs')
      return f'{pip} {shlex.quote(f"{_NAME}[{extra}] @ " + (f"{vcs}+" if vcs else "") + url)}'
    folder = urllib.request.url2pathname(urllib.parse.urlparse(url).path)
    editable = bool(direct_url.get('dir_info', {}).get('editable'))
  else:
    folder = source
  if os.path.abspath(folder) == os.path.abspath(cwd):
    folder = '.'
  return f'{pip} {"-e " if editable else ""}{shlex.quote(f"{folder}[{extra}]")}'
