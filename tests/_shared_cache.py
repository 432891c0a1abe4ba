"""The pytest-xdist workers' jax compilation caches, shared (conftest.py registers it)."""
import os
import shutil

import pytest


class SharedCache:
  """The pytest-xdist workers' compilation caches, shared between tests.

  Test files on the two workers compile many of the same programs (the same optimizer steps
  in the golden, compiled, probe and conversion tests). After each test, when nothing in this
  process compiles, this worker hard-links the entries jax finished in its own directory into
  a shared one; before each test it hard-links into its own directory those the other worker
  put there. A link is made whole or not at all (where the file system has none, a copy is
  renamed into place), and only finished files are linked, so jax never meets a half-written
  entry; an entry is never written again (jax skips a key it has).
  """

  def __init__(self, own, shared):
    self.own, self.shared = own, shared
    os.makedirs(own, exist_ok=True)
    os.makedirs(shared, exist_ok=True)
    self.known = set()   # names in both directories

  def _link_missing(self, source, target):
    names = {name for name in os.listdir(source) if not name.endswith('.partial')} - self.known
    for name in names:
      src, dst = os.path.join(source, name), os.path.join(target, name)
      try:
        os.link(src, dst)
      except FileExistsError:
        pass
      except OSError:   # a file system without hard links: a whole copy, renamed into place
        if not os.path.exists(dst):
          partial = f'{dst}.{os.getpid()}.partial'
          shutil.copyfile(src, partial)
          os.replace(partial, dst)
    self.known |= names

  @pytest.hookimpl(hookwrapper=True)
  def pytest_runtest_protocol(self, item, nextitem):
    self._link_missing(self.shared, self.own)
    yield
    self._link_missing(self.own, self.shared)
