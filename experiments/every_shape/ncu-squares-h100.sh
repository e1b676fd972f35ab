# What bounds step 12 at a large square, against cuBLAS, on an H100: one launch of each under ncu (ncu_launch.py)
# with the sections that say how busy the tensor cores are, at what clock, and where warps wait.
# Usage: bash ncu-squares-h100.sh 4096x4096x4096 OUTDIR  (writes OUTDIR/ncu-SHAPE.txt)
set -u
shape=$1 out=$2
ncu --profile-from-start off --clock-control none --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section LaunchStats \
    --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max,dram__bytes_read.sum,lts__t_sectors_srcunit_tex.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed \
    python3 experiments/every_shape/ncu_launch.py $shape > $out/ncu-$shape.txt 2>&1
