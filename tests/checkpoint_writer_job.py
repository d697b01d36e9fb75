"""Saves a checkpoint, then starts a second save and stops half-way, waiting to be killed.

Usage: checkpoint_writer_job.py PATH SHARDED(0|1)
Prints HALF-WRITTEN once the second save has written part of its data.
"""

import sys

import torch

import graphemb
from graphemb.checkpoint.tensorfile import TensorFileWriter


def main(path: str, sharded: bool) -> None:
    emb = graphemb.NodeEmbedding(20000, 16, "big", init_func=lambda t: t.fill_(1.0))
    graphemb.save(path, emb, sharded=sharded)
    emb.all_set_embedding(torch.full((20000, 16), 2.0))

    original = TensorFileWriter.write
    calls = {"n": 0}

    def write_then_stall(self, name, rows):
        original(self, name, rows)
        calls["n"] += 1
        if calls["n"] == 3:
            self._file.flush()
            print("HALF-WRITTEN", flush=True)
            sys.stdin.readline()  # blocks until the test kills this process

    TensorFileWriter.write = write_then_stall
    graphemb.save(path, emb, sharded=sharded, chunk_bytes=1 << 16)


if __name__ == "__main__":
    main(sys.argv[1], bool(int(sys.argv[2])))
