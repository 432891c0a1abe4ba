"""`flax-optim-compat migrate`'s checkpoint path, proven by running both ways:
train_state_checkpoint.py's legacy checkpoint, converted with the exact command the migrate
report prints (only `<IN>` and `<OUT>` filled in), resumed by the migrated script where this
package cannot be imported, equal to the legacy script resuming from the same file, and the
legacy resume equal to flax 0.5.3's (tools/oracle/gen_migrate_corpus.py).

The script is migrated alone (one `migrate --write --report` call on a copy of it): the corpus,
migrated as one folder, is test_migrate_equivalence_corpus.py.
"""
import json
import pathlib

import numpy as np
import pytest

from tests import _migrate_harness as harness
from tests.migrate import _equivalence as equivalence


@pytest.fixture(scope='module')
def workspace(tmp_path_factory):
  return tmp_path_factory.mktemp('migrate_equivalence_checkpoint')


@pytest.fixture(scope='module')
def migration(workspace):
  pytest.importorskip('libcst')
  return harness.migrate_copy([harness.CORPUS / harness.CHECKPOINT_SCRIPT],
                              workspace / 'migrated')


@pytest.mark.parametrize('name', equivalence.script_params(
    [harness.CHECKPOINT_SCRIPT], {**equivalence.NOT_MIGRATED, **equivalence.WRONG_NUMBERS}))
def test_converted_checkpoint_resumes_like_legacy(name, migration, workspace):
  legacy, migrated = harness.resume_both_ways(migration, workspace / 'migrated' / name,
                                              workspace / 'checkpoint_path')
  golden = json.loads((equivalence.GOLDENS / name.replace('.py', '.json')).read_text())
  assert (golden['checkpoint_step'], golden['resume_step']) == (harness.CHECKPOINT_STEP,
                                                                harness.RESUME_STEP)
  np.testing.assert_allclose(legacy, golden['resumed_trajectory'], rtol=equivalence.ORACLE_RTOL,
                             atol=equivalence.ORACLE_ATOL)
  harness.assert_equivalent(legacy, migrated, migration.exactness(pathlib.Path(name)),
                            label=f'{name} resumed')
