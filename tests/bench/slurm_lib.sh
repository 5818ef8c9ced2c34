# Sourced by benchmarks that compare Yard with Slurm side by side: a private one-node
# slurmctld on loopback (no slurmd: its jobs stay pending), with a munged of its own.
#   slurm_start DIR   -> 0 and SLURM_CONF exported, slurm_pids set; 1 when Slurm is not
#                        installed (apt-get install slurmctld slurm-client munge)
#   slurm_stop        -> stops what slurm_start started
slurm_pids=()
slurm_start() {
  local dir=$1
  command -v slurmctld >/dev/null && command -v munged >/dev/null && command -v sbatch >/dev/null &&
    [ -f /etc/munge/munge.key ] || return 1
  mkdir -p "$dir/state" "$dir/munge"
  cat >"$dir/slurm.conf" <<C
ClusterName=yardbench
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=6917
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmctldPidFile=$dir/slurmctld.pid
SlurmctldLogFile=$dir/slurmctld.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
MaxArraySize=10001
MaxJobCount=200000
SlurmUser=root
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
C
  munged --socket="$dir/munge/munge.socket" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/seed" --force
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -f "$SLURM_CONF"
  for _ in $(seq 50); do sinfo >/dev/null 2>&1 && break; sleep 0.1; done
  slurm_pids=("$(cat "$dir/munge/munged.pid")" "$(cat "$dir/slurmctld.pid")")
}
slurm_stop() {
  for p in "${slurm_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  # Gone before the caller removes their directory (slurmctld saves its state as it exits).
  for p in "${slurm_pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  done
  slurm_pids=()
}
