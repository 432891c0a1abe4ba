"""The suite's shared compilation cache (``tests/_shared_cache.py``): what one pytest-xdist
worker finished reaches the other's directory before its next test, as the same file."""
import os

from tests import _shared_cache


def _run_one_test(cache):
  """One test's protocol around the hookwrapper: before, the test, after."""
  protocol = cache.pytest_runtest_protocol(item=None, nextitem=None)
  next(protocol)
  return protocol


def _finish(protocol):
  try:
    next(protocol)
  except StopIteration:
    return
  raise AssertionError('the hookwrapper yielded twice')


def test_a_finished_entry_reaches_the_other_worker_before_its_next_test(tmp_path):
  shared = tmp_path / 'shared'
  gw0 = _shared_cache.SharedCache(str(tmp_path / 'gw0'), str(shared))
  gw1 = _shared_cache.SharedCache(str(tmp_path / 'gw1'), str(shared))

  test = _run_one_test(gw0)
  (tmp_path / 'gw0' / 'key-a-cache').write_bytes(b'executable a')   # jax, during the test
  assert not (shared / 'key-a-cache').exists()    # nothing leaves before the test ends
  _finish(test)
  assert (shared / 'key-a-cache').read_bytes() == b'executable a'

  test = _run_one_test(gw1)
  assert (tmp_path / 'gw1' / 'key-a-cache').read_bytes() == b'executable a'
  assert os.path.samefile(tmp_path / 'gw1' / 'key-a-cache', tmp_path / 'gw0' / 'key-a-cache')
  _finish(test)


def test_an_entry_both_workers_compiled_keeps_each_workers_own_file(tmp_path):
  shared = tmp_path / 'shared'
  gw0 = _shared_cache.SharedCache(str(tmp_path / 'gw0'), str(shared))
  gw1 = _shared_cache.SharedCache(str(tmp_path / 'gw1'), str(shared))
  first, second = _run_one_test(gw0), _run_one_test(gw1)
  (tmp_path / 'gw0' / 'key-b-cache').write_bytes(b'from gw0')
  (tmp_path / 'gw1' / 'key-b-cache').write_bytes(b'from gw1')
  _finish(first)
  _finish(second)      # the shared name exists: gw1's file is not linked over it
  _finish(_run_one_test(gw1))
  assert (shared / 'key-b-cache').read_bytes() == b'from gw0'
  assert (tmp_path / 'gw1' / 'key-b-cache').read_bytes() == b'from gw1'


def test_without_hard_links_a_whole_copy_is_renamed_into_place(tmp_path, monkeypatch):
  def no_links(src, dst):
    raise PermissionError(1, 'Operation not permitted', dst)
  monkeypatch.setattr(_shared_cache.os, 'link', no_links)
  shared = tmp_path / 'shared'
  gw0 = _shared_cache.SharedCache(str(tmp_path / 'gw0'), str(shared))
  gw1 = _shared_cache.SharedCache(str(tmp_path / 'gw1'), str(shared))
  test = _run_one_test(gw0)
  (tmp_path / 'gw0' / 'key-c-cache').write_bytes(b'executable c')
  _finish(test)
  _finish(_run_one_test(gw1))
  assert (tmp_path / 'gw1' / 'key-c-cache').read_bytes() == b'executable c'
  assert sorted(os.listdir(shared)) == ['key-c-cache']   # no partial copy left
