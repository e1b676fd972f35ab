// Where the block scheduler puts a persistent grid of one CTA per SM (200 KiB of shared memory each), launched
// plainly, in 2-CTA clusters (1D and 2D grids, each scheduling policy) and in 8- and 16-CTA clusters (whose CTAs
// share one GPC, which shows the GPCs' SM numbers). Prints JSON: per launch, per CTA in launch order
// (blockIdx.y * gridDim.x + blockIdx.x): [SM id, rank in its cluster, cluster id, start time in us];
// the maximum number of co-resident clusters goes to stderr.
// nvcc -arch=sm_90a -o /tmp/placement_probe placement_probe.cu && /tmp/placement_probe > placement.json
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1);} } while (0)

__global__ void probe(int* out, long long spin_ns) {
  extern __shared__ char smem[];
  unsigned smid, rank, cid;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(cid));
  unsigned long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  unsigned lin = blockIdx.y * gridDim.x + blockIdx.x;
  if (threadIdx.x == 0) {
    out[lin * 4 + 0] = smid;
    out[lin * 4 + 1] = rank;
    out[lin * 4 + 2] = cid;
    out[lin * 4 + 3] = (int)(t0 & 0x7fffffff);
    smem[0] = 1;
  }
  unsigned long long t;
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < (unsigned long long)spin_ns);
}

static void launch(const char* name, int grid, int cluster, int policy, size_t smem, int* dout, bool first, int gy = 1, int cy = 1) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid / gy, gy);
  cfg.blockDim = dim3(384);
  cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute attr[2];
  int n = 0;
  if (cluster * cy > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster; attr[n].val.clusterDim.y = cy; attr[n].val.clusterDim.z = 1; n++;
    if (policy >= 0) {
      attr[n].id = cudaLaunchAttributeClusterSchedulingPolicyPreference;
      attr[n].val.clusterSchedulingPolicyPreference = (cudaClusterSchedulingPolicy)policy; n++;
    }
    int maxc = 0;
    cfg.attrs = attr; cfg.numAttrs = n;
    cudaOccupancyMaxActiveClusters(&maxc, (void*)probe, &cfg);
    fprintf(stderr, "%s: max active clusters of %d: %d\n", name, cluster, maxc);
  }
  cfg.attrs = attr; cfg.numAttrs = n;
  CK(cudaMemset(dout, 0xff, grid * 4 * sizeof(int)));
  CK(cudaLaunchKernelEx(&cfg, probe, dout, (long long)200000));
  CK(cudaDeviceSynchronize());
  std::vector<int> h(grid * 4);
  CK(cudaMemcpy(h.data(), dout, h.size() * sizeof(int), cudaMemcpyDeviceToHost));
  int tmin = 0x7fffffff;
  for (int i = 0; i < grid; i++) if (h[i * 4 + 3] < tmin) tmin = h[i * 4 + 3];
  printf("%s\"%s\": {\"grid\": %d, \"cluster\": %d, \"ctas\": [", first ? "" : ",\n", name, grid, cluster);
  for (int i = 0; i < grid; i++)
    printf("%s[%d,%d,%d,%d]", i ? "," : "", h[i * 4], h[i * 4 + 1], h[i * 4 + 2], (h[i * 4 + 3] - tmin) / 1000);
  printf("]}");
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  size_t smem = 200 * 1024;
  CK(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  CK(cudaFuncSetAttribute(probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  int* dout;
  CK(cudaMalloc(&dout, 4096 * 4 * sizeof(int)));
  printf("{\"sms\": %d,\n", sms);
  launch("plain", sms, 1, -1, smem, dout, true);
  launch("plain_again", sms, 1, -1, smem, dout, false);
  launch("cluster2", sms, 2, -1, smem, dout, false);
  launch("cluster2_again", sms, 2, -1, smem, dout, false);
  launch("cluster2_spread", sms, 2, (int)cudaClusterSchedulingPolicySpread, smem, dout, false);
  launch("cluster2_load_balancing", sms, 2, (int)cudaClusterSchedulingPolicyLoadBalancing, smem, dout, false);
  launch("grid2xhalf_cluster2x1", sms, 2, -1, smem, dout, false, sms / 2, 1);
  launch("gridhalfx2_cluster1x2", sms, 1, -1, smem, dout, false, 2, 2);
  launch("plain_grid2xhalf", sms, 1, -1, smem, dout, false, sms / 2, 1);
  launch("cluster8", 128, 8, -1, smem, dout, false);
  launch("cluster16", 256, 16, -1, smem, dout, false);
  printf("}\n");
  return 0;
}
