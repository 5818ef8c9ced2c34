"""Elastic training under torchrun for the autoscaler's end-to-end test.

Each rendezvous prints `rendezvous world=W rank=R step=S` (S: the step it resumes from, read
from the checkpoint). Every step all-reduces over gloo; rank 0 checkpoints every few steps.
A control file the test writes says how hard to work and when to stop:
  high  - burn CPU for most of each step (the autoscaler should scale out)
  low   - sleep through each step (it should scale in)
  stop  - every rank finishes and exits 0
Ranks agree on the control word by an all-reduce, so a change is taken by all at the same
step. Usage: elastic_train.py CONTROL_FILE CHECKPOINT_FILE
"""
import os
import sys
import time

import torch
import torch.distributed as dist

WORDS = {"low": 0, "high": 1, "stop": 2}


def read_control(path):
    try:
        with open(path) as f:
            return WORDS.get(f.read().strip(), 0)
    except OSError:
        return 0


def load_step(path):
    try:
        with open(path) as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def save_step(path, step):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(step))
    os.replace(tmp, path)


def main():
    control, checkpoint = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    step = load_step(checkpoint)
    print(f"rendezvous world={world} rank={rank} step={step}", flush=True)
    while True:
        word = torch.tensor([read_control(control) if rank == 0 else 0])
        dist.all_reduce(word)
        if word.item() == WORDS["stop"]:
            break
        start = time.monotonic()
        if word.item() == WORDS["high"]:
            while time.monotonic() - start < 0.45:  # most of the step busy
                sum(i * i for i in range(2000))
            time.sleep(0.05)
        else:
            time.sleep(0.5)
        total = torch.tensor([1.0])
        dist.all_reduce(total)
        assert total.item() == world, f"all-reduce {total.item()} want {world}"
        step += 1
        if rank == 0 and step % 5 == 0:
            save_step(checkpoint, step)
    if rank == 0:
        save_step(checkpoint, step)
    print(f"finished world={world} rank={rank} step={step}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
