"""The programs here are inputs to migrate (whole folders, as a user passes them), not modules
to import: a TensorFlow agent among them imports tensorflow, which the suite does not have."""
collect_ignore_glob = ['*/*.py']
