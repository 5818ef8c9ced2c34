"""PyTorch DDP over gloo with env:// rendezvous: each rank contributes rank+1; the
all-reduced sum must be n(n+1)/2. Prints one line a test can check."""
import os
import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"]), (rank, world)
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
want = world * (world + 1) / 2
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
loss = model(torch.ones(8, 4)).sum()
loss.backward()
print(f"rank {rank} of {world} allreduce {t.item():.0f} want {want:.0f} ddp-step ok", flush=True)
dist.barrier()
dist.destroy_process_group()
assert t.item() == want
