"""Plays PaddlePaddle's role maker (paddle.distributed.fleet PaddleCloudRoleMaker) on the
variables Yard sets, for the PS and collective modes, and checks they are consistent:
every endpoint list, this replica's own endpoint and id."""
import os

e = os.environ
me = f'{e["YARD_NODE_ADDR"]}:{e["YARD_PORT"]}'
if "PADDLE_PSERVERS_IP_PORT_LIST" in e:  # PS mode
    role = e["TRAINING_ROLE"]
    assert role == e["PADDLE_TRAINING_ROLE"] and role in ("PSERVER", "TRAINER"), role
    servers = e["PADDLE_PSERVERS_IP_PORT_LIST"].split(",")
    trainers = e["PADDLE_TRAINER_ENDPOINTS"].split(",")
    assert int(e["PADDLE_TRAINERS_NUM"]) == len(trainers)
    assert f'{e["POD_IP"]}:{e["PADDLE_PORT"]}' == me
    if role == "PSERVER":
        assert me in servers and "PADDLE_TRAINER_ID" not in e
        current = servers.index(me)
    else:
        current = int(e["PADDLE_TRAINER_ID"])
        assert trainers[current] == me, (trainers, me)
    print(f"ps-mode {role} {current} of servers={len(servers)} trainers={len(trainers)} ok", flush=True)
else:  # collective
    trainers = e["PADDLE_TRAINER_ENDPOINTS"].split(",")
    tid = int(e["PADDLE_TRAINER_ID"])
    assert trainers[tid] == e["PADDLE_CURRENT_ENDPOINT"] == me, (trainers, tid, me)
    assert int(e["PADDLE_TRAINERS_NUM"]) == len(trainers) == int(e["PADDLE_NNODES"])
    assert e["PADDLE_MASTER"] == trainers[0]
    assert e["PADDLE_JOB_ID"] == f'{e["YARD_JOB"]}-{e["YARD_TASK"]}'
    print(f"collective trainer {tid} of {len(trainers)} master {e['PADDLE_MASTER']} ok", flush=True)
