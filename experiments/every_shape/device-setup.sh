# Sourced by the scripts of this folder that run on the lent GPU machine, after ../shared/device/README.md's first
# call (part a of the wheel): installs apache-tvm from part b, makes $R for the results (the script tars them into
# $OUT at its end), lists the GPUs, and defines `on GPU SECONDS NAME COMMAND...` (COMMAND on one GPU, its output in
# $R/NAME.log, its exit status and seconds in $R/wall.txt), `sweep_shards` (sweep.py in SHARDS processes),
# `check_step12` / `check_summary`, and `ncu_step12` / `ncu_summary`.
set -u
R=/tmp/results; mkdir -p $R
bash .device/b/install.sh > $R/install.log 2>&1 || { cat $R/install.log; exit 3; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi -L > $R/gpus.txt
on() {  # gpu seconds name command...
  local gpu=$1 limit=$2 name=$3; shift 3
  local t0=$(date +%s)
  CUDA_VISIBLE_DEVICES=$gpu timeout $limit "$@" > $R/$name.log 2>&1
  echo "$name gpu=$gpu rc=$? s=$(( $(date +%s) - t0 ))" >> $R/wall.txt
}
sweep_shards() {  # sweep.py's random shapes (COUNT, SEED) in SHARDS processes building at once, on GPU 0
  local shards=${SHARDS:-12} i
  for i in $(seq 0 $((shards - 1))); do
    on 0 ${SWEEP_LIMIT:-240} sweep-$i python3 experiments/every_shape/sweep.py --count ${COUNT:-180} --impl ${IMPL:-solutions} \
        --seed ${SEED:-20261129} --shard $i/$shards --json $R/sweep-$i.json &
  done
  wait
}
check_step12() {  # [KNOWN_BAD]: sweep_shards on the solution, its step 12 grade, the GPU known-bad variants -k KNOWN_BAD
  sweep_shards
  on 0 200 grade12 python3 -m grader --step 12 --impl solutions --track hopper
  if [ -n "${1:-}" ]; then on 0 300 known-bad python3 -m pytest -q tests/test_known_bad_gpu.py -k "$1"; fi
}
check_summary() {  # what check_step12 found, where it ran
  grep -h "kernels," $R/sweep-*.log 2>/dev/null
  grep -h '"passed": false' $R/sweep-*.log 2>/dev/null | head -20
  tail -15 $R/grade12.log 2>/dev/null
  tail -5 $R/known-bad.log 2>/dev/null
}
ncu_step12() {  # shape [plan]: ncu on one launch of step 12 (its own plan, or check_and_time.py's plan) and one of
  # cuBLAS (clocks not locked), $R/ncu-SHAPE[-PLAN].txt
  local name=ncu-$1${2:+-$2}
  ncu --profile-from-start off --clock-control none --section SpeedOfLight --section LaunchStats \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,gpu__time_duration.sum,sm__cycles_active.avg,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed \
    python3 experiments/every_shape/ncu_launch.py $1 ${2:-} > $R/$name.txt 2>&1
  echo "$name rc=$?" >> $R/wall.txt
}
ncu_summary() {  # what ncu_step12 found
  for f in $R/ncu-*.txt; do
    echo "== $f"
    grep -E "own plan|^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|L2 Hit|dram__|lts__t_sector_hit|tensor|SM Frequency|Grid Size|Cluster" $f | head -40
  done
}
