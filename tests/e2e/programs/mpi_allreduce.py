"""mpi4py allreduce: each rank contributes rank+1; every rank checks the sum."""
import os

from mpi4py import MPI

c = MPI.COMM_WORLD
total = c.allreduce(c.rank + 1)
want = c.size * (c.size + 1) // 2
where = f'in {os.environ.get("YARD_ROLE")} {os.environ.get("YARD_REPLICA_INDEX")} on {os.environ.get("YARD_NODE_ADDR")}'
print(f"rank {c.rank} of {c.size} {where} allreduce {total} want {want}", flush=True)
assert total == want
