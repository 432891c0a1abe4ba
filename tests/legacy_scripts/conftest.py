"""The scripts here are run in subprocesses by the tests (like a user runs them), never imported
by pytest: importing one needs `from flax import optim`, i.e. the installed import alias."""
collect_ignore_glob = ['*.py']
