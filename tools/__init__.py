"""Developer tools of flax_optim_compat, run from a clone (none is part of the package):

* ``tools/oracle/``: the fixture generators, run in the real flax 0.5.3 (``python -m tools.oracle``);
* ``guide_table.py``, ``parity_report.py``: docs/optimizers.md's table; the worst difference
  from the oracle's trajectories;
* ``migrate_corpus.py``, ``migrate_proof_table.py``: docs/migrate.md's measurements;
* ``corpus/``: the public flax.optim-era programs (``programs.tsv``) and the scripts that
  fetch, scan and import-sweep them (``corpus/README.md``);
* ``lanes.sh``: the suite on the dependency floors or the newest releases, each in a fresh venv.
"""
