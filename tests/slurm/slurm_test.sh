#!/usr/bin/env bash
# laggard under a real Slurm (issue 28): Debian's slurmctld, slurmd and munge (and Open MPI's
# mpirun), one node, private to this test. It starts its own munged (own key and socket), slurmctld
# and slurmd (free ports, its own spool, state and log directories), all in one temp dir, runs the
# demo the ways users run jobs, and stops exactly the daemons (and step daemons) it started, also
# when a check fails. Nothing system-wide is read or changed: no /etc/slurm, no /etc/munge, no
# system daemon. Docs: docs/slurm.md.
#
# Cases, each naming the slow rank (2) in the report:
#   srun         laggard run -- srun -n 4: one run, <id>.slurm-J.0
#   batch        laggard run -- sbatch --wait, two srun steps and an NVTX program run by the batch
#                script itself: two runs (<id>.slurm-J.0, .1), none for the batch script, and no
#                config warning from the batch shell, srun or the direct program (ranks only)
#   mpirun       two Open MPI mpiruns in one batch job: slurm-J.ompi-A and slurm-J.ompi-B
#   requeue      a job that requeues itself: slurm-J.0 and slurm-J.0.requeue1, never mixed
#   sigterm      SIGTERM to laggard run -- srun: every rank writes its last window (signal 15)
#   scancel      scancel --signal=TERM of a batch job: likewise
#   export-none  #SBATCH --export=NONE with LD_PRELOAD exported in the script: srun passes laggard's
#                variables on; srun --export=NONE on the command line is warned about
#
# Usage: tests/slurm/slurm_test.sh BUILD_DIR   (exit 77: skipped, when not root)
# SLURM_TEST_KEEP=1 keeps the temp dir (logs, job output, rank files) for a look afterwards.
set -euo pipefail

CASES=${SLURM_TEST_CASES:-srun batch mpirun requeue sigterm scancel export_none}
KEEP=${SLURM_TEST_KEEP:-0}
BIN=$(cd "${1:?usage: slurm_test.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
export TEST_LAGGARD=$BIN/laggard
LIB=$BIN/liblaggard.so DEMO=$BIN/laggard-demo CHECK="python3 $HERE/check.py"
for f in "$TEST_LAGGARD" "$LIB" "$DEMO"; do [ -e "$f" ] || { echo "slurm_test: $f is missing (build first)" >&2; exit 1; }; done

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: the Slurm test starts munged, slurmctld and slurmd of its own, which needs root"
  exit 77
fi

# ---- what it needs: Debian's packages (scripts/setup installs them too) ----
need=()
for p in slurmctld slurmd slurm-client munge openmpi-bin python3; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "slurm_test: installing ${need[*]}"
  # policy-rc.d or not, no service of these packages is used: the test starts its own daemons.
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
    "${need[@]}" >/dev/null || { apt-get -o DPkg::Lock::Timeout=300 update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
      "${need[@]}" >/dev/null; }
fi

T=$(mktemp -d "/tmp/laggard-slurm.$$.XXXXXX")
chmod 0755 "$T"  # slurmd and the jobs read the config; munged wants its socket dir 0755
# Nothing of an outer job (CI that runs in a Slurm job itself) or of a developer's shell.
for v in $(compgen -e | grep -E '^(SLURM_|SRUN_|SBATCH_|SALLOC_|LAGGARD_|PMIX_|PMI_|OMPI_|TORCHELASTIC_)'); do unset "$v"; done
unset LD_PRELOAD RANK LOCAL_RANK WORLD_SIZE NVTX_INJECTION64_PATH
export SLURM_CONF=$T/slurm.conf
# Under ASan (scripts/sanitize) liblaggard.so goes into srun, sbatch and bash too: their own leaks
# are Slurm's and bash's, not laggard's (the other tests check laggard's).
[ -z "${ASAN_OPTIONS:-}" ] || export ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=0

# ---- stopping exactly what we started ----
our_pid() {  # pid file: its pid when that process still runs with our temp dir in its command line
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "$T" && echo "$pid"
}
our_stepds() {  # slurmstepd processes of our slurmd: they carry our SLURM_CONF
  local p
  for p in $(pgrep -x slurmstepd 2>/dev/null || true); do
    tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qxF "SLURM_CONF=$SLURM_CONF" && echo "$p"
  done
}
alive() {  # a process that has not ended (a zombie has: its parent, maybe not ours, reaps it)
  local state
  state=$(sed -n 's/^[0-9]* (.*) \([A-Z]\) .*/\1/p' 2>/dev/null <"/proc/$1/stat") || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}
stop_cluster() {
  local rc=$? pids p
  trap - EXIT INT TERM
  if [ -f "$SLURM_CONF" ] && [ -n "$(our_pid "$T/slurmctld.pid" || true)" ]; then
    scancel --quiet --user=root 2>/dev/null || true
  fi
  pids="$(our_stepds) $(our_pid "$T/slurmd.pid" || true) $(our_pid "$T/slurmctld.pid" || true) $(our_pid "$T/munged.pid" || true)"
  for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do  # up to 5 s, then SIGKILL
    local left=""
    for p in $pids; do alive "$p" && left+=" $p"; done
    [ -z "$left" ] && break
    sleep 0.1
  done
  for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
  if [ $rc -ne 0 ]; then
    echo "slurm_test: FAILED (exit $rc); logs:" >&2
    for f in "$T"/log/*.log; do echo "--- $f" >&2; tail -n 15 "$f" >&2; done
  fi
  if [ "$KEEP" = 1 ] || [ $rc -ne 0 ]; then echo "slurm_test: kept $T" >&2; else rm -rf "$T"; fi
  exit $rc
}
trap stop_cluster EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() { echo "slurm_test: FAIL: $*" >&2; exit 1; }

# Waits until a command succeeds: the condition, never a fixed time; $1 seconds only bound a failure.
wait_for() {
  local limit=$1 what=$2
  shift 2
  local end=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || fail "waited ${limit}s for $what"
    sleep 0.1
  done
}

# Two ports that nothing listens on, below the ephemeral range (so no outgoing connection takes them).
free_ports() {
  python3 - <<'EOF'
import random, socket
ports = []
while len(ports) < 2:
    p = random.randint(20000, 32000)
    s = socket.socket()
    try:
        s.bind(("", p))
        if p not in ports:
            ports.append(p)
    except OSError:
        pass
    finally:
        s.close()
print(*ports)
EOF
}

# ---- the cluster ----
start_cluster() {
  mkdir -p "$T/munge" "$T/state" "$T/spool" "$T/log" "$T/out"
  chmod 0755 "$T/munge"
  head -c 1024 /dev/urandom >"$T/munge.key"
  chmod 0400 "$T/munge.key"
  munged --socket="$T/munge/munge.socket.2" --key-file="$T/munge.key" --pid-file="$T/munged.pid" \
    --log-file="$T/log/munged.log" --seed-file="$T/munged.seed"
  local node ports
  node=$(hostname -s)
  read -r -a ports <<<"$(free_ports)"
  # config_overrides: 16 CPUs on a 2-core machine. linuxproc and task/none: no cgroups needed.
  # MinJobAge=4: sbatch --wait polls every 2 s (it waits longer only when MinJobAge/2 allows,
  # src/sbatch/sbatch.c _job_wait). cred_expire=5 (the least): a requeued job waits this long plus
  # one second before it starts again (src/slurmctld/job_mgr.c); sched_interval=1 then starts it.
  cat >"$SLURM_CONF" <<EOF
ClusterName=laggardtest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=${ports[0]}
SlurmdPort=${ports[1]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/munge.socket.2,cred_expire=5
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
MinJobAge=4
KillWait=10
MailProg=/bin/true
NodeName=$node NodeAddr=127.0.0.1 CPUs=16 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  slurmctld -f "$SLURM_CONF"
  slurmd -f "$SLURM_CONF"
  wait_for 60 "the node to be idle" bash -c '[ "$(sinfo -h -o %T 2>/dev/null)" = idle ]'
  echo "slurm_test: cluster up in $T (slurmctld :${ports[0]}, slurmd :${ports[1]}, node $node with 16 CPUs)"
}

# ---- the cases ----
# The demo: rank 2 twice as slow in backward; several 0.2 s windows per rank.
DEMO_ARGS=(--steps 40 --step-ms 20 --slow-rank 2 --slow-section backward --slow-factor 2)
export LAGGARD_FLUSH_S=0.2

new_out() {  # a fresh LAGGARD_OUT per case (a case may run twice: SLURM_TEST_CASES="scancel scancel")
  mktemp -d "$T/out/$1.XXXX"
}

only_runs() {  # OUT, then the expected "name ranks" lines (in name order)
  local out=$1 got want
  shift
  got=$($CHECK runs "$out")
  want=$(printf '%s\n' "$@")
  [ "$got" = "$want" ] || fail "runs in $out:"$'\n'"$got"$'\n'"expected:"$'\n'"$want"
}

case_srun() {
  local out
  out=$(new_out srun)
  $TEST_LAGGARD run --out "$out" -- srun -n 4 "$DEMO" "${DEMO_ARGS[@]}" >"$T/srun.out" 2>&1 ||
    fail "laggard run -- srun: exit $?: $(cat "$T/srun.out")"
  local run
  run=$(basename "$(ls -d "$out"/*)")
  [[ $run =~ ^[0-9]{8}-[0-9]{6}-[0-9a-f]{4}\.slurm-[0-9]+\.0$ ]] || fail "srun's run id '$run'"
  only_runs "$out" "$run 4"
  grep -q "laggard: run $run: 4 rank file(s)" "$T/srun.out" || fail "laggard run's closing line: $(cat "$T/srun.out")"
  $CHECK report "$out/$run" 4 2
}

case_batch() {
  local out
  out=$(new_out batch)
  cat >"$T/batch.sh" <<EOF
#!/bin/bash
#SBATCH -n 4
srun -n 4 $DEMO ${DEMO_ARGS[*]}
$DEMO --steps 3 --step-ms 1   # run by the batch script itself: a launcher's child, not rank 0
srun -n 4 $DEMO ${DEMO_ARGS[*]}
EOF
  # A bad value: each rank warns once; the batch shell, srun and the direct program must not.
  LAGGARD_WINDOWS_PER_FILE=zero $TEST_LAGGARD run --out "$out" -- sbatch --wait -o "$T/batch.job" "$T/batch.sh" \
    >"$T/batch.out" 2>&1 || fail "laggard run -- sbatch --wait: exit $?: $(cat "$T/batch.out" "$T/batch.job")"
  local job id
  job=$(sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p' "$T/batch.out")
  id=$(ls "$out" | sed -n 's/\.slurm-.*//p' | sort -u)
  only_runs "$out" "$id.slurm-$job.0 4" "$id.slurm-$job.1 4"
  for step in 0 1; do
    grep -q "laggard: run $id.slurm-$job.$step: 4 rank file(s)" "$T/batch.out" ||
      fail "laggard run names step $step: $(cat "$T/batch.out")"
    $CHECK report "$out/$id.slurm-$job.$step" 4 2
  done
  local warnings
  warnings=$(grep -c "LAGGARD_WINDOWS_PER_FILE" "$T/batch.job" || true)
  [ "$warnings" = 8 ] || fail "$warnings config warnings, expected 8 (one per rank): $(cat "$T/batch.job")"
}

case_requeue() {
  local out
  out=$(new_out requeue)
  cat >"$T/requeue.sh" <<EOF
#!/bin/bash
#SBATCH -n 4 --requeue
export LD_PRELOAD=$LIB LAGGARD_OUT=$out
srun -n 4 $DEMO ${DEMO_ARGS[*]}
if [ "\${SLURM_RESTART_COUNT:-0}" = 0 ]; then
  scontrol requeue \$SLURM_JOB_ID
  sleep 600  # ended by the requeue
fi
EOF
  timeout 120 sbatch --wait -o "$T/requeue.job" "$T/requeue.sh" >"$T/requeue.out" 2>&1 ||
    fail "sbatch --wait of a requeued job: exit $?: $(cat "$T/requeue.out" "$T/requeue.job")"
  local job
  job=$(sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p' "$T/requeue.out")
  only_runs "$out" "slurm-$job.0 4" "slurm-$job.0.requeue1 4"
  $CHECK report "$out/slurm-$job.0" 4 2
  $CHECK report "$out/slurm-$job.0.requeue1" 4 2
}

LONG_DEMO=(--steps 100000 --step-ms 20 --slow-rank 2 --slow-section backward --slow-factor 2)
# What these cases check is that the ranks get SIGTERM, not srun's SIGKILL: the last flush gets
# time enough on a loaded machine (LAGGARD_EXIT_WAIT_S bounds it, 1 s by default).
export LAGGARD_EXIT_WAIT_S=10

case_sigterm() {
  local out
  out=$(new_out sigterm)
  $TEST_LAGGARD run --out "$out" -- srun -n 4 "$DEMO" "${LONG_DEMO[@]}" >"$T/sigterm.out" 2>&1 &
  local pid=$! run sent rc=0
  wait_for 60 "4 ranks with 3 windows each" bash -c "$CHECK windows $out/* 4 3"
  run=$(ls -d "$out"/*)
  sent=$(date +%s%N)
  kill -TERM $pid
  wait $pid || rc=$?
  echo "slurm_test: laggard run -- srun ended with exit status $rc after SIGTERM"
  grep -q "tasks 0-3: Terminated" "$T/sigterm.out" || fail "srun's tasks did not end of SIGTERM: $(cat "$T/sigterm.out")"
  $CHECK last-window "$run" 4 15 "$sent"
  $CHECK report "$run" 4 2
}

# A batch job's steps stopped with scancel --signal=TERM: the tasks get SIGTERM, the batch script
# and the srun in it do not. (A plain scancel also makes srun send SIGKILL to its tasks at once,
# which races their last write: tried here at load 10-15, 1 to 3 of the 4 ranks lost it in 3 of 7
# runs, with binary and JSON files, srun inside or outside the job. docs/slurm.md.)
case_scancel() {
  local out job sent
  out=$(new_out scancel)
  cat >"$T/steps.sh" <<EOF
#!/bin/bash
#SBATCH -n 4
export LD_PRELOAD=$LIB LAGGARD_OUT=$out
srun -n 4 $DEMO ${LONG_DEMO[*]}
EOF
  job=$(sbatch --parsable -o "$T/steps.job" "$T/steps.sh")
  wait_for 60 "4 ranks with 3 windows each" $CHECK windows "$out/slurm-$job.0" 4 3
  sent=$(date +%s%N)
  scancel --signal=TERM "$job"
  wait_for 60 "job $job to end" bash -c "[ -z \"\$(squeue -h -j $job 2>/dev/null)\" ]"
  grep -q "tasks 0-3: Terminated" "$T/steps.job" || fail "the tasks did not end of SIGTERM: $(cat "$T/steps.job")"
  $CHECK last-window "$out/slurm-$job.0" 4 15 "$sent"
  $CHECK report "$out/slurm-$job.0" 4 2
}

# Two Open MPI mpiruns in one batch job (no srun): two runs, told apart by Open MPI's job id.
case_mpirun() {
  local out job
  out=$(new_out mpirun)
  cat >"$T/mpirun.sh" <<EOF
#!/bin/bash
#SBATCH -n 4
export LD_PRELOAD=$LIB LAGGARD_OUT=$out OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun -np 4 $DEMO ${DEMO_ARGS[*]}
mpirun -np 4 $DEMO ${DEMO_ARGS[*]}
EOF
  timeout 120 sbatch --wait -o "$T/mpirun.job" "$T/mpirun.sh" >"$T/mpirun.out" 2>&1 ||
    fail "sbatch --wait of two mpiruns: exit $?: $(cat "$T/mpirun.out" "$T/mpirun.job")"
  job=$(sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p' "$T/mpirun.out")
  local runs
  runs=$($CHECK runs "$out")
  [ "$(echo "$runs" | grep -c "^slurm-$job\.ompi-[0-9]* 4$")" = 2 ] && [ "$(echo "$runs" | wc -l)" = 2 ] ||
    fail "runs of two mpiruns in $out:"$'\n'"$runs"
  for run in $(echo "$runs" | cut -d' ' -f1); do $CHECK report "$out/$run" 4 2; done
}

case_export_none() {
  if [ -n "${ASAN_OPTIONS:-}" ]; then  # scripts/sanitize asan
    echo "slurm_test: export_none left out under ASan: --export=NONE keeps ASAN_OPTIONS from srun and its tasks, whose preloaded ASan runtime then refuses to start"
    return
  fi
  local out
  out=$(new_out export-none)
  cat >"$T/export.sh" <<EOF
#!/bin/bash
#SBATCH -n 4
#SBATCH --export=NONE
export LD_PRELOAD=$LIB LAGGARD_OUT=$out LAGGARD_FLUSH_S=0.2
srun -n 4 $DEMO ${DEMO_ARGS[*]}
srun --export=NONE -n 1 /bin/true
EOF
  timeout 120 sbatch --wait -o "$T/export.job" "$T/export.sh" >"$T/export.out" 2>&1 ||
    fail "sbatch --wait --export=NONE: exit $?: $(cat "$T/export.out" "$T/export.job")"
  local job
  job=$(sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p' "$T/export.out")
  only_runs "$out" "slurm-$job.0 4"
  $CHECK report "$out/slurm-$job.0" 4 2
  grep -q "srun --export=NONE starts the tasks without LD_PRELOAD" "$T/export.job" ||
    fail "no warning about srun --export=NONE: $(cat "$T/export.job")"
}

start_cluster
for c in $CASES; do
  started=$SECONDS
  "case_$c"
  echo "slurm_test: $c passed ($((SECONDS - started)) s)"
done
echo "slurm_test: all passed"
