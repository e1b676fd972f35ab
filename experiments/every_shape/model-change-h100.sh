# Step 12's host model against the plans it chose before, at the shapes where its choice changed (issue 34:
# stream-K after waves of whole tiles, the writeback's rounds, loads at 61 bytes a cycle). Each shape is one
# check_and_time.py run (correct, same bits twice, timed against cuBLAS in one interleaved run): "step12" is the
# model now, the --plans the one before (and, where named, others). On one GPU or two (half the shapes each), after
# ../shared/device/README.md's first call; everything comes back in $OUT/results.tgz.
source experiments/every_shape/device-setup.sh
shape() {  # gpu shape plans
  CUDA_VISIBLE_DEVICES=$1 timeout 200 python3 experiments/every_shape/check_and_time.py --steps 12 --plans $3 \
      --shapes $2 --json $R/$2.json >> $R/gpu$1.log 2>&1 || echo "$2 rc=$?" >> $R/gpu$1.log
}
gpu0() {
  shape 0 8192x8192x8192 dp224c1
  shape 0 8192x3584x18944 dp256c1,sk256
  shape 0 128x3584x18944 dp64r64c1
  shape 0 1000x28672x4096 dp176c1
}
gpu1() {  # on GPU 0 after gpu0's shapes where there is one GPU
  local g=$(( $(nvidia-smi -L | wc -l) > 1 ? 1 : 0 ))
  shape $g 8192x6144x4096 dp176c1
  shape $g 8192x28672x4096 dp208c1
  shape $g 8192x37888x3584 dp160c1
}
if [ $(nvidia-smi -L | wc -l) -gt 1 ]; then gpu0 & gpu1 & wait; else gpu0; gpu1; fi
cat $R/gpus.txt
grep -hE "cublas|False|rc=" $R/gpu*.log
tar czf $OUT/results.tgz -C $R .
