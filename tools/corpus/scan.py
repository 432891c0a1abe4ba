#!/usr/bin/env python3
"""Which removed or changed jax / flax names a corpus of legacy programs uses.

Standalone and stdlib only (it never imports jax or flax): it parses every ``.py`` file with
``ast`` and resolves import aliases (``import jax.numpy as jnp``, ``from jax import tree_util``,
``from jax import tree_multimap``, ``from flax import nn``) to full dotted names before it
compares them with the table ``NAMES`` below.

Layout of the root folder: one sub-folder per program, ``ROOT/<program>/...``. By default the
programs are the rows of ``programs.tsv`` next to this file (id = folder below ROOT, plus the
row's directories); ``--depth N`` instead makes every folder N levels below ROOT one program
(``--depth 3``: ``flax@v0.3.6/examples/wmt``).

    python tools/corpus/scan.py ROOT                 # table: name, #programs, #files
    python tools/corpus/scan.py ROOT --by-program    # per program: the names it uses
    python tools/corpus/scan.py ROOT --refs          # every resolved jax/flax/optax name (TSV)
    python tools/corpus/scan.py ROOT --format tsv    # machine-readable table
"""
import argparse
import ast
import collections
import os
import sys

# One row per removed or changed name. Columns:
#   key    what is matched: a dotted name (the name itself or anything below it: 'flax.nn'
#          matches 'flax.nn.Module'); 'dotted.name(kw1=,kw2=)' for a call of that name with any
#          of those keywords; '.method()' for a method call on a value that is not an imported
#          module (e.g. '.unfreeze()').
#   status 'removed' (gone today), 'changed' (still there, behaves or is called differently, or
#          deprecated), 'kept' (context only: still there; listed with --all).
#   note   today's equivalent, in a few words (docs/legacy_names.md has the details).
NAMES = [
    # key                 status      note
    ('jax.tree_multimap', 'removed', 'jax.tree_util.tree_map(f, a, *rest)'),
    ('jax.tree_util.tree_multimap', 'removed', 'jax.tree_util.tree_map(f, a, *rest)'),
    ('jax.tree_map', 'removed', 'jax.tree_util.tree_map / jax.tree.map'),
    ('jax.tree_leaves', 'removed', 'jax.tree_util.tree_leaves / jax.tree.leaves'),
    ('jax.tree_flatten', 'removed', 'jax.tree_util.tree_flatten / jax.tree.flatten'),
    ('jax.tree_unflatten', 'removed', 'jax.tree_util.tree_unflatten / jax.tree.unflatten'),
    ('jax.tree_structure', 'removed', 'jax.tree_util.tree_structure / jax.tree.structure'),
    ('jax.tree_transpose', 'removed', 'jax.tree_util.tree_transpose / jax.tree.transpose'),
    ('jax.tree_reduce', 'removed', 'jax.tree_util.tree_reduce / jax.tree.reduce'),
    ('jax.host_id', 'changed', 'jax.process_index()'),
    ('jax.host_count', 'changed', 'jax.process_count()'),
    ('jax.host_ids', 'changed', 'list(range(jax.process_count()))'),
    ('jax.ops.index_update', 'removed', 'x.at[idx].set(y)'),
    ('jax.ops.index_add', 'removed', 'x.at[idx].add(y)'),
    ('jax.ops.index_mul', 'removed', 'x.at[idx].multiply(y)'),
    ('jax.ops.index_min', 'removed', 'x.at[idx].min(y)'),
    ('jax.ops.index_max', 'removed', 'x.at[idx].max(y)'),
    ('jax.ops.index', 'removed', 'numpy-style index (jnp.index_exp)'),
    ('jax.numpy.clip(a_min=,a_max=,a=)', 'removed', 'jnp.clip(x, min=, max=)'),
    ('jax.lax.tie_in', 'removed', 'drop it: tie_in(x, y) returns y'),
    ('jax.numpy.DeviceArray', 'removed', 'jax.Array'),
    ('jax.interpreters.xla.DeviceArray', 'removed', 'jax.Array'),
    ('jax.interpreters.xla._DeviceArray', 'removed', 'jax.Array'),
    ('jax.interpreters.pxla.ShardedDeviceArray', 'removed', 'jax.Array'),
    ('jax.interpreters.xla', 'removed', 'jax.Array / jax.device_put / jax.interpreters.mlir'),
    ('jax.interpreters.pxla', 'removed', 'jax.sharding / jax.Array'),
    ('jax.config.config', 'removed', 'from jax import config (or jax.config)'),
    ('jax.experimental.optimizers', 'removed', 'jax.example_libraries.optimizers (or optax)'),
    ('jax.experimental.stax', 'removed', 'jax.example_libraries.stax (or flax.linen)'),
    ('jax.experimental.host_callback', 'removed', 'jax.debug.callback / jax.pure_callback'),
    ('jax.experimental.maps', 'removed', 'jax.sharding.Mesh / shard_map'),
    ('jax.experimental.PartitionSpec', 'removed', 'jax.sharding.PartitionSpec'),
    ('jax.random.KeyArray', 'removed', 'jax.Array'),
    ('jax.random.PRNGKeyArray', 'removed', 'jax.Array'),
    ('jax.random.shuffle', 'removed', 'jax.random.permutation(key, x, independent=False)'),
    ('jax.device_put_replicated', 'removed', 'jax.device_put(x, NamedSharding replicated) / flax.jax_utils.replicate'),
    ('jax.device_put_sharded', 'removed', 'jax.device_put with a sharding'),
    ('jax.xla_computation', 'removed', 'jax.jit(f).lower(*args)'),
    ('jax.partial', 'removed', 'functools.partial'),
    ('jax.util.partial', 'removed', 'functools.partial'),
    ('jax.api', 'removed', 'jax (top level)'),
    ('jax.abstract_arrays', 'removed', 'jax.core.ShapedArray'),
    ('jax.lib.xla_bridge', 'removed', 'jax.devices / jax.default_backend / jax.extend.backend'),
    ('jax.nn.normalize', 'removed', 'jax.nn.standardize'),
    ('jax.numpy.trapz', 'removed', 'jax.scipy.integrate.trapezoid'),
    ('jax.numpy.product', 'removed', 'jnp.prod'),
    ('jax.numpy.cumproduct', 'removed', 'jnp.cumprod'),
    ('jax.numpy.alltrue', 'removed', 'jnp.all'),
    ('jax.numpy.sometrue', 'removed', 'jnp.any'),
    ('jax.numpy.round_', 'removed', 'jnp.round'),
    ('jax.numpy.in1d', 'removed', 'jnp.isin'),
    ('jax.numpy.row_stack', 'removed', 'jnp.vstack'),
    ('jax.numpy.NINF', 'removed', '-jnp.inf'),
    ('jax.numpy.issubsctype', 'removed', 'jnp.issubdtype'),
    ('jax.numpy.reshape(newshape=)', 'changed', 'jnp.reshape(x, shape=)'),
    ('.to_py()', 'removed', 'np.asarray(x)'),
    ('.tile()', 'removed', 'jnp.tile(x, reps)'),
    ('jax.config.enable_omnistaging', 'removed', 'drop it: omnistaging is always on (jax >= 0.2.12)'),
    ('jax.config.FLAGS', 'removed', 'jax.config.update(...) / environment variables'),
    ('jax.mask', 'removed', 'none (masking was removed); jax.export shape polymorphism'),
    ('jax.profiler.StepTraceContext', 'removed', 'jax.profiler.StepTraceAnnotation'),
    ('jax.test_util', 'removed', 'absltest.TestCase / numpy.testing (JaxTestCase, JaxTestLoader are private now)'),
    ('jax.custom_transforms', 'removed', 'jax.custom_jvp / jax.custom_vjp'),
    ('jax.defvjp_all', 'removed', 'jax.custom_vjp'),
    ('jax.core.NamedShape', 'removed', 'none (named shapes were dropped)'),
    ('jax.core.as_named_shape', 'removed', 'none (named shapes were dropped)'),
    ('jax.experimental.pjit.PartitionSpec', 'removed', 'jax.sharding.PartitionSpec'),
    ('jax.experimental.pjit.with_sharding_constraint', 'removed', 'jax.lax.with_sharding_constraint'),
    ('jax.experimental.pjit.pjit', 'changed', 'jax.jit (in_shardings=, out_shardings=)'),
    ('jax.interpreters.sharded_jit', 'removed', 'jax.jit with shardings'),
    ('jax.lib.xla_client', 'removed', 'jax.devices() / jax.Device; compiled.cost_analysis()'),
    ('jax.prng', 'removed', 'jax.random.key(seed, impl=...) / jax.extend.random'),
    ('jax.pxla', 'removed', 'jax.interpreters.pxla (itself mostly gone): jax.Array'),
    ('jax.xla', 'removed', 'jax.interpreters.xla (itself mostly gone): jax.Array'),
    ('jax.process_indexs', 'removed', 'a codemod typo for jax.host_ids in the source: list(range(jax.process_count()))'),
    ('optax.differentially_private_aggregate', 'changed', 'optax.contrib.differentially_private_aggregate'),
    ('flax.testing', 'kept', 'still there; importing it needs the tensorboard package'),
    ('flax.training.common_utils.pmean', 'removed', 'jax.lax.pmean'),
    # flax
    ('flax.optim', 'removed', 'optax (or flax_optim_compat)'),
    ('flax.nn', 'removed', 'flax.linen (pre-Linen module system)'),
    ('flax.deprecated.nn', 'removed', 'flax.linen (flax.nn moved here in flax 0.4.0, then dropped)'),
    ('flax.training.lr_schedule', 'changed', 'still there, deprecated (logs a warning): optax schedules'),
    ('flax.core.frozen_dict.unfreeze', 'changed', 'no-op on the plain dict that init returns (flax >= 0.7.1)'),
    ('flax.core.unfreeze', 'changed', 'no-op on the plain dict that init returns (flax >= 0.7.1)'),
    ('flax.core.frozen_dict.freeze', 'changed', 'flax.core.freeze'),
    ('flax.core.freeze', 'kept',    'still there; init no longer returns FrozenDict'),
    ('flax.core.FrozenDict', 'changed', 'init returns a plain dict (flax >= 0.7.1)'),
    ('flax.core.frozen_dict.FrozenDict', 'changed', 'init returns a plain dict (flax >= 0.7.1)'),
    ('.unfreeze()', 'changed', 'init returns a plain dict: dict has no .unfreeze()'),
    ('flax.training.checkpoints.save_checkpoint', 'changed', 'orbax-checkpoint (flax.training.checkpoints is legacy)'),
    ('flax.training.checkpoints.restore_checkpoint', 'changed', 'orbax-checkpoint (flax.training.checkpoints is legacy)'),
    ('flax.training.checkpoints.latest_checkpoint', 'changed', 'orbax-checkpoint'),
    ('flax.training.checkpoints.natural_sort', 'changed', 'orbax-checkpoint'),
    ('flax.traverse_util.ModelParamTraversal', 'changed', 'optax.multi_transform with a label tree'),
    ('flax.struct.PyTreeNode', 'kept',    'still there'),
    ('flax.linen.Module.initialize_carry', 'changed', 'cell.initialize_carry(rng, input_shape) (flax >= 0.7.0)'),
    ('.initialize_carry()', 'changed', 'instance method taking (rng, input_shape) since flax 0.7.0'),
    ('flax.jax_utils.replicate', 'kept',    'still there (flax.jax_utils)'),
    ('flax.jax_utils.unreplicate', 'kept',    'still there (flax.jax_utils)'),
    ('flax.jax_utils.prefetch_to_device', 'kept',    'still there (flax.jax_utils)'),
    ('flax.optim.dynamic_scale', 'removed', 'flax.training.dynamic_scale'),
    ('flax.metrics.tensorboard', 'kept', 'still there; importing it needs tensorflow'),
] + [
    # flax.nn's (and flax.deprecated.nn's) functions that are not the pre-Linen module system:
    # the activations, pooling and initializers, each the same function as flax.linen's
    # (flax 0.5.3 defines both from jax.nn / flax.linen); `flax.nn` stays refused as a whole.
    (f'{nn}.{name}', 'removed', f'flax.linen.{name}')
    for nn in ('flax.nn', 'flax.deprecated.nn')
    for name in ('celu', 'elu', 'gelu', 'glu', 'leaky_relu', 'log_sigmoid', 'log_softmax',
                 'logsumexp', 'normalize', 'one_hot', 'relu', 'relu6', 'selu', 'sigmoid',
                 'silu', 'soft_sign', 'softmax', 'softplus', 'swish', 'tanh', 'hard_tanh',
                 'hard_sigmoid', 'hard_silu', 'hard_swish', 'initializers', 'max_pool',
                 'avg_pool', 'pooling', 'activation')
] + [
    # numpy's aliases: removed in numpy 1.24 (the builtin-type aliases) or numpy 2.0.
    ('numpy.bool', 'changed', 'bool (numpy 2 brought np.bool back as np.bool_)'),
    ('numpy.int', 'removed', 'int (numpy 1.24)'),
    ('numpy.float', 'removed', 'float (numpy 1.24)'),
    ('numpy.complex', 'removed', 'complex (numpy 1.24)'),
    ('numpy.object', 'removed', 'object (numpy 1.24)'),
    ('numpy.str', 'removed', 'str (numpy 1.24)'),
    ('numpy.long', 'changed', 'int (numpy 1.24 removed it; numpy 2 np.long is the C long)'),
    ('numpy.unicode', 'removed', 'str (numpy 1.24)'),
    ('numpy.float_', 'removed', 'np.float64 (numpy 2.0)'),
    ('numpy.complex_', 'removed', 'np.complex128 (numpy 2.0)'),
    ('numpy.string_', 'removed', 'np.bytes_ (numpy 2.0)'),
    ('numpy.unicode_', 'removed', 'np.str_ (numpy 2.0)'),
    ('numpy.int0', 'removed', 'np.intp (numpy 2.0)'),
    ('numpy.bool8', 'removed', 'np.bool_ (numpy 2.0)'),
    ('numpy.NaN', 'removed', 'np.nan (numpy 2.0)'),
    ('numpy.NAN', 'removed', 'np.nan (numpy 2.0)'),
    ('numpy.Inf', 'removed', 'np.inf (numpy 2.0)'),
    ('numpy.Infinity', 'removed', 'np.inf (numpy 2.0)'),
    ('numpy.infty', 'removed', 'np.inf (numpy 2.0)'),
    ('numpy.PINF', 'removed', 'np.inf (numpy 2.0)'),
    ('numpy.NINF', 'removed', '-np.inf (numpy 2.0)'),
    ('numpy.product', 'removed', 'np.prod (numpy 2.0)'),
    ('numpy.cumproduct', 'removed', 'np.cumprod (numpy 2.0)'),
    ('numpy.alltrue', 'removed', 'np.all (numpy 2.0)'),
    ('numpy.sometrue', 'removed', 'np.any (numpy 2.0)'),
    ('numpy.round_', 'removed', 'np.round (numpy 2.0)'),
    ('numpy.in1d', 'removed', 'np.isin (numpy 2.4)'),
    ('numpy.trapz', 'removed', 'np.trapezoid (numpy 2.4)'),
    ('numpy.row_stack', 'changed', 'np.vstack (deprecated in numpy 2.0)'),
    ('numpy.cast', 'removed', 'np.asarray(x, dtype) (numpy 2.0)'),
    ('numpy.asfarray', 'removed', 'np.asarray(x, float) (numpy 2.0)'),
    ('numpy.msort', 'removed', 'np.sort(a, axis=0) (numpy 2.0)'),
    ('numpy.find_common_type', 'removed', 'np.result_type / np.promote_types (numpy 2.0)'),
    ('numpy.issubsctype', 'removed', 'np.issubdtype (numpy 2.0)'),
    ('numpy.mat', 'removed', 'np.asmatrix (numpy 2.0)'),
    ('numpy.sctypes', 'removed', 'explicit dtype lists (numpy 2.0)'),
    ('numpy.warnings', 'removed', 'import warnings (numpy 1.24)'),
    ('jax.numpy.float_', 'changed', 'jnp.float64 / jnp.float32 (still there)'),
    ('jax.numpy.int', 'removed', 'int'),
    ('jax.numpy.float', 'removed', 'float'),
    ('jax.numpy.bool', 'changed', 'jnp.bool_'),
]

ROOTS = ('jax', 'flax', 'optax', 'jaxlib', 'numpy')
DEFAULT_TSV = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'programs.tsv')


def _parse_key(key):
  """('name', dotted, None) | ('kw', dotted, {kw,...}) | ('method', attr, None)."""
  if key.startswith('.'):
    return 'method', key[1:].rstrip('()'), None
  if key.endswith(')') and '(' in key:
    dotted, kws = key[:-1].split('(', 1)
    return 'kw', dotted, {k.rstrip('=') for k in kws.split(',') if k}
  return 'name', key, None


class FileScan(ast.NodeVisitor):
  """Resolves aliases in source order; collects resolved dotted names and matched keys."""

  def __init__(self):
    self.alias = {}             # local name -> dotted name
    self.refs = collections.Counter()     # resolved dotted names under ROOTS
    self.calls = []             # (dotted, {keywords})
    self.methods = collections.Counter()  # method names called on non-module values
    self.subclasses = []        # resolved base names of class definitions

  # --- imports -------------------------------------------------------------
  def visit_Import(self, node):
    for a in node.names:
      if a.asname:
        self.alias[a.asname] = a.name
      else:
        top = a.name.split('.')[0]
        self.alias[top] = top
      self._ref(a.name)

  def visit_ImportFrom(self, node):
    if node.level or not node.module:
      return
    for a in node.names:
      if a.name == '*':
        self._ref(node.module)
        continue
      full = node.module + '.' + a.name
      self.alias[a.asname or a.name] = full
      self._ref(full)

  # --- names ---------------------------------------------------------------
  def resolve(self, node):
    """Full dotted name of a Name / Attribute chain whose head is an imported name, or None."""
    parts = []
    while isinstance(node, ast.Attribute):
      parts.append(node.attr)
      node = node.value
    if not isinstance(node, ast.Name) or node.id not in self.alias:
      return None
    return '.'.join([self.alias[node.id]] + parts[::-1])

  def _ref(self, dotted):
    if dotted.split('.')[0] in ROOTS:
      self.refs[dotted] += 1
      # `from jax.config import config; config.X` is also the jax.config.X name
      if dotted.startswith('jax.config.config.'):
        self.refs['jax.config.' + dotted[len('jax.config.config.'):]] += 1

  def visit_Attribute(self, node):
    dotted = self.resolve(node)
    if dotted is not None:
      self._ref(dotted)
      return  # the whole chain is one reference
    self.generic_visit(node)

  def visit_Name(self, node):
    if isinstance(node.ctx, ast.Load) and node.id in self.alias:
      self._ref(self.alias[node.id])

  def visit_Call(self, node):
    dotted = self.resolve(node.func)
    if dotted is not None:
      self.calls.append((dotted, {k.arg for k in node.keywords if k.arg}))
    elif isinstance(node.func, ast.Attribute):
      self.methods[node.func.attr] += 1
    self.generic_visit(node)

  def visit_ClassDef(self, node):
    for b in node.bases:
      self.subclasses.append(self.resolve(b) or ast.unparse(b))
    self.generic_visit(node)


def scan_file(path):
  with open(path, 'rb') as f:
    src = f.read()
  try:
    tree = ast.parse(src, filename=path)
  except (SyntaxError, ValueError):
    # Python-2-only files and notebooks exported with magics: report, do not stop.
    return None
  fs = FileScan()
  fs.visit(tree)
  return fs


def match(fs):
  """The NAMES keys one scanned file uses."""
  hits = set()
  for key, _, _ in NAMES:
    kind, target, kws = _parse_key(key)
    if kind == 'name':
      if any(r == target or r.startswith(target + '.') for r in fs.refs):
        hits.add(key)
    elif kind == 'kw':
      if any(d == target and (k & kws) for d, k in fs.calls):
        hits.add(key)
    elif fs.methods.get(target):
      hits.add(key)
  return hits


def programs_from_tsv(root, tsv):
  """{program id: [py files]} from a programs.tsv (id, ..., directory columns).

  The id's first component is the program's folder below root; `directory` lists the
  program's folders (comma-separated, '.' for the whole folder) inside it.
  """
  import csv
  progs = {}
  with open(tsv, newline='') as f:
    for row in csv.DictReader(f, delimiter='\t'):
      folder = row['id'].split('/')[0]
      files = set()
      for d in row['directory'].split(','):
        base = os.path.join(os.path.abspath(root), folder, '' if d == '.' else d)
        for dirpath, _, filenames in os.walk(base):
          files.update(os.path.join(dirpath, fn) for fn in filenames if fn.endswith('.py'))
      if files:
        progs[row['id']] = sorted(files)
  return progs


def programs(root, depth):
  """{program id: [py files]}; a program is a folder `depth` levels below root."""
  progs = collections.defaultdict(list)
  root = os.path.abspath(root)
  for dirpath, dirnames, filenames in os.walk(root):
    dirnames.sort()
    rel = os.path.relpath(dirpath, root)
    parts = [] if rel == '.' else rel.split(os.sep)
    for fn in sorted(filenames):
      if not fn.endswith('.py'):
        continue
      if len(parts) < depth:
        continue  # files above program level belong to no program
      progs['/'.join(parts[:depth])].append(os.path.join(dirpath, fn))
  return progs


PRE_LINEN = ('flax.nn', 'flax.deprecated.nn')
# Names that only a program built on the pre-Linen module system uses (flax.nn's activations
# such as flax.nn.relu were also used by Linen programs, e.g. as gin configurables).
PRE_LINEN_CORE = ('Module', 'Model', 'module', 'stochastic', 'make_rng', 'Collection',
                  'base', 'capture_module_outputs', 'attention', 'linear', 'normalization',
                  'recurrent', 'Dense', 'Conv', 'BatchNorm', 'LayerNorm', 'Embed', 'dropout',
                  'stateful', 'utils')


def _under(name, prefixes):
  return any(name == p or name.startswith(p + '.') for p in prefixes)


def kind_of(file_scans):
  """subclass | flax.nn | linen | none, for one program.

  subclass: a class derives from flax.optim's OptimizerDef; flax.nn: the program defines or
  builds models with the pre-Linen module system (flax.nn / flax.deprecated.nn); linen: it
  uses flax.linen; none: neither (flax.optim on plain pytrees, or no flax models at all).
  """
  pre_linen = [p + '.' + c for p in PRE_LINEN for c in PRE_LINEN_CORE]
  n_pre = n_linen = 0
  for fs in file_scans:
    bases = [b for b in fs.subclasses if b]
    if any(b.split('.')[-1] == 'OptimizerDef' for b in bases):
      return 'subclass'
    if any(_under(b, PRE_LINEN) for b in bases) or any(_under(r, pre_linen) for r in fs.refs):
      n_pre += 1
    if any(_under(r, ('flax.linen',)) for r in fs.refs):
      n_linen += 1
  # a leftover pre-Linen file in a Linen program does not make it a flax.nn program
  if n_pre and n_pre >= n_linen:
    return 'flax.nn'
  if n_linen:
    return 'linen'
  return 'none'


def optim_names(file_scans):
  """The flax.optim names a program uses, without the 'flax.optim.' prefix."""
  out = set()
  for fs in file_scans:
    for r in fs.refs:
      if r.startswith('flax.optim.'):
        out.add(r[len('flax.optim.'):])
    if fs.methods.get('apply_gradient'):
      out.add('Optimizer.apply_gradient')
  return sorted(out)


def scan(root, depth=1, tsv=None):
  """{program: {'files': {path: FileScan|None}, 'hits': {key: set(files)}}}."""
  result = {}
  progs = programs_from_tsv(root, tsv) if tsv else programs(root, depth)
  for prog, files in sorted(progs.items()):
    scans = {}
    hits = collections.defaultdict(set)
    for p in files:
      fs = scan_file(p)
      scans[p] = fs
      if fs is not None:
        for key in match(fs):
          hits[key].add(os.path.relpath(p, root))
    result[prog] = {'files': scans, 'hits': hits}
  return result


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  ap.add_argument('root')
  ap.add_argument('--depth', type=int, default=None,
                  help='folder levels below root that name one program (instead of --programs)')
  ap.add_argument('--programs', default=DEFAULT_TSV,
                  help='programs.tsv naming the programs (default: the one next to this file)')
  ap.add_argument('--by-program', action='store_true')
  ap.add_argument('--refs', action='store_true',
                  help='every resolved jax/flax/optax dotted name: name, #programs, #files')
  ap.add_argument('--format', choices=('text', 'tsv', 'md'), default='text')
  ap.add_argument('--all', action='store_true',
                  help="also list 'kept' rows and rows no program uses")
  ap.add_argument('--files', action='store_true', help='after the table, the files using each name')
  args = ap.parse_args(argv)

  tsv = None if args.depth is not None or not os.path.exists(args.programs) else args.programs
  res = scan(args.root, args.depth or 1, tsv)
  bad = [p for r in res.values() for p, fs in r['files'].items() if fs is None]
  n_files = sum(len(r['files']) for r in res.values())

  if args.by_program:
    for prog, r in res.items():
      scans = [fs for fs in r['files'].values() if fs is not None]
      print(f'{prog}\tkind={kind_of(scans)}\t{len(r["files"])} files')
      print('  flax.optim: ' + (', '.join(optim_names(scans)) or '-'))
      for key in sorted(r['hits']):
        print(f'  {key}  ({len(r["hits"][key])} files)')
    return 0

  if args.refs:
    progs = collections.defaultdict(set)
    files = collections.defaultdict(set)
    for prog, r in res.items():
      for p, fs in r['files'].items():
        if fs is None:
          continue
        for ref in fs.refs:
          progs[ref].add(prog)
          files[ref].add(p)
    for ref in sorted(progs):
      print(f'{ref}\t{len(progs[ref])}\t{len(files[ref])}')  # files: distinct
    return 0

  kinds = {prog: kind_of([fs for fs in r['files'].values() if fs is not None])
           for prog, r in res.items()}
  rows = []
  for key, status, note in NAMES:
    if status == 'kept' and not args.all:
      continue
    progs = [prog for prog, r in res.items() if key in r['hits']]
    nfiles = len(set().union(*(res[p]['hits'][key] for p in progs)))  # distinct files
    by_kind = collections.Counter(kinds[p] for p in progs)
    by_kind = ', '.join(f'{k} {by_kind[k]}' for k in ('linen', 'none', 'flax.nn', 'subclass')
                        if by_kind[k])
    if progs or args.all:
      rows.append((key, status, len(progs), nfiles, by_kind or '-', note))
  rows.sort(key=lambda r: (-r[2], -r[3], r[0]))
  if args.format == 'tsv':
    print('name\tstatus\tprograms\tfiles\tby_kind\ttoday')
    for r in rows:
      print('\t'.join(map(str, r)))
  elif args.format == 'md':
    print('| name | status | #programs | #files | programs by kind | today |')
    print('| --- | --- | ---: | ---: | --- | --- |')
    for r in rows:
      print(f'| `{r[0]}` | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} |')
  else:
    w = max([len(r[0]) for r in rows] + [4])
    print(f'{"name":<{w}}  {"status":<7}  programs  files  {"by kind":<28}  today')
    for r in rows:
      print(f'{r[0]:<{w}}  {r[1]:<7}  {r[2]:>8}  {r[3]:>5}  {r[4]:<28}  {r[5]}')
  if args.files:
    for r in rows:
      print(f'\n{r[0]}:')
      for prog, res_p in res.items():
        for f in sorted(res_p['hits'].get(r[0], ())):
          print(f'  {f}')
  print(f'\n{len(res)} programs, {n_files} files, {len(bad)} not parsed'
        + (': ' + ', '.join(os.path.relpath(b, args.root) for b in bad) if bad else ''),
        file=sys.stderr)
  return 0


if __name__ == '__main__':
  sys.exit(main())
