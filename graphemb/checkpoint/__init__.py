"""Checkpoints: save embeddings and optimizer state from any layout, load into any other.

``save`` gathers every embedding's rows and the optimizer's per-row state (Adam moments and
per-row steps, Adagrad sums) to CPU and writes them with their metadata: format version,
names, shapes, dtypes, storage and partition, optimizer class and hyper-parameters
(including each group's current learning rate). ``load`` puts them back into embeddings of
any world size, partition or device -- 4 GPU ranks to 1 CPU process in a notebook, 1 process
to 3 ranks with range partitions -- after which training continues exactly as if it had
never stopped.

Two layouts:

* single file (default): rank 0 writes one file, pulling rows chunk by chunk (memory on
  rank 0 is bounded by the chunk, never a second copy of a table); at load rank 0 reads it
  and sends every row to its owner. The file only needs to be visible to rank 0.
* sharded (``sharded=True``): ``path`` is a directory; every rank writes the rows it owns in
  parallel, and ``manifest.json`` -- replaced atomically once every shard is on disk -- says
  which shards make the checkpoint. At load every rank reads a share of the shards and sends
  rows to their (new) owners. Needs a filesystem that every rank sees.
  (``torch.distributed.checkpoint`` reshards only between DTensor/ShardedTensor placements,
  contiguous even shards; a row ownership such as ``id % world_size`` or uneven ranges is
  outside what it can express, hence the explicit ids stored with each shard.)

Files use the safetensors layout (:mod:`graphemb.checkpoint.tensorfile`): tensors and JSON
only, nothing is unpickled except ``extra``, read with ``torch.load(weights_only=True)``.
Writes are atomic: an interrupted save (exception, SIGKILL) leaves the previous checkpoint
at ``path`` loadable.
``load`` checks everything -- format, version, names, shapes, dtypes, optimizer class and
state, checksums of every tensor -- before it changes anything.

With a process group both functions are collective: every rank calls them with the same
arguments. They run in phases (prepare, write; validate, read), and every phase ends with an
agreement: a failure on any one rank -- an ``extra`` rank 0 cannot encode, a full disk, a
malformed file, an exception of any type -- makes every rank raise at once, the failed rank
its own error and the others an error of the same built-in type naming the failed rank and
its message (:mod:`graphemb.distributed.agreement`). Ranks that stream rows in lockstep
rounds vote after every round
(:meth:`graphemb.distributed.exchange.Exchange.true_on_any_rank`), and ranks that write on
their own poll for a failed peer between chunks, so nobody works on for long after a peer
failed. A failed save leaves the previous checkpoint as it was; a failed load leaves the
live tables and optimizer as they were, with one exception: an I/O error while streaming
rows whose checksums were verified moments before (a failing disk -- the files are held
open, so a concurrent save cannot change them) stops the load on every rank with the rows of
earlier rounds already loaded.
"""

# format: metadata and compatibility; job: tables and phases; saver / loader: the two ways.
from .format import FORMAT_VERSION
from .loader import load
from .saver import save

__all__ = ["save", "load", "FORMAT_VERSION"]
