# Sourced by the scripts of this folder that run on the lent GPU machine, after ../shared/device/README.md's first
# call (part a of the wheel): installs apache-tvm from part b, makes $R for the results (the script tars them into
# $OUT at its end), lists the GPUs, and defines `on GPU SECONDS NAME COMMAND...` (COMMAND on one GPU, its output in
# $R/NAME.log, its exit status and seconds in $R/wall.txt) and `sweep_shards` (sweep.py in SHARDS processes).
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
