# What bounds step 12 at 256 tokens, against cuBLAS, on an H100: one launch of each under ncu (ncu_launch.py), with
# the sections that say where warps wait (WarpStateStats), what the memory system carries (MemoryWorkloadAnalysis)
# and how busy the schedulers are. Results: h100-ncu256/.
set -u
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
for shape in 256x4096x4096 256x4608x3584; do
  timeout 200 ncu --profile-from-start off --clock-control none --section SpeedOfLight --section WarpStateStats \
      --section MemoryWorkloadAnalysis --section SchedulerStats --section LaunchStats --section Occupancy \
      --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,lts__t_sectors_srcunit_tex.sum \
      python3 experiments/every_shape/ncu_launch.py $shape > $OUT/ncu-$shape.txt 2>&1 || echo "rc=$? at $shape"
done
grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Compute \(SM\)|Stall|hmma|Warp Cycles Per Issued|Issued Warp|No Eligible|dram__bytes|Registers|Grid Size|Block Size" $OUT/ncu-*.txt | cut -c1-160
