# Step 12 against its two L2-group variants (l2_group/make_variant.py) at the squares and the 8192-token layers, one
# interleaved run per shape with cuBLAS, on a node of 4 H100s (each GPU its shapes); then ncu at 8192^3 on the
# rows2048 variant (as ncu-squares-h100.sh). After ../shared/device/README.md's first call. Results: $OUT/l2-group.tgz
set -u
R=/tmp/l2g; mkdir -p $R
bash .device/b/install.sh > $R/install.log 2>&1 || { cat $R/install.log; exit 3; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi -L > $R/gpus.txt
V=experiments/every_shape/l2_group
run() {  # gpu name shapes
  CUDA_VISIBLE_DEVICES=$1 timeout 420 python3 experiments/every_shape/check_and_time.py --steps 12 --plans auto \
    --plans-impl $V/rows2048,$V/balanced --shapes $3 --json $R/$2.json > $R/$2.log 2>&1
  echo "$2 rc=$?" >> $R/wall.txt
}
run 0 squares-a 2048x2048x2048,4096x4096x4096,8192x4096x1024,4096x4096x16384 &
(run 1 squares-b 8192x8192x8192,8192x4096x4096
 CUDA_VISIBLE_DEVICES=1 timeout 150 ncu --profile-from-start off --clock-control none --section SpeedOfLight \
   --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max,dram__bytes_read.sum,lts__t_sectors_srcunit_tex.sum \
   python3 experiments/every_shape/ncu_launch.py 8192x8192x8192 "" $V/rows2048 > $R/ncu-rows2048-8192.txt 2>&1) &
run 2 llama-8192 8192x6144x4096,8192x28672x4096,8192x4096x14336 &
run 3 qwen-8192 8192x4608x3584,8192x3584x3584,8192x37888x3584,8192x3584x18944 &
wait
cat $R/wall.txt $R/gpus.txt; grep -h cublas $R/*.log
grep -E "^  [a-z_]+.*\(|dram__bytes|cycles_elapsed|hmma" $R/ncu-rows2048-8192.txt | cut -c1-130
tar czf $OUT/l2-group.tgz -C $R .
