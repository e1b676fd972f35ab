// GPU time of one launch of a grid of one CTA per SM that spins 0, 20 or 100 us, plain and in 2-CTA clusters
// (CUDA events around each launch, median of 200, the two interleaved): what a cluster launch itself costs.
// nvcc -arch=sm_90a -o /tmp/launch_latency launch_latency.cu && /tmp/launch_latency
#include <cstdio>
#include <algorithm>
#include <vector>
#include <cuda_runtime.h>
__global__ void body(int* out, long long spin_ns) {
  extern __shared__ char smem[];
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < (unsigned long long)spin_ns);
  if (threadIdx.x == 0) { smem[0] = 1; out[blockIdx.x] = (int)smem[0]; }
}
static float once(int cluster, long long spin, int* d, cudaEvent_t a, cudaEvent_t b) {
  cudaLaunchConfig_t cfg = {}; cfg.gridDim = dim3(132); cfg.blockDim = dim3(384); cfg.dynamicSmemBytes = 200 * 1024;
  cudaLaunchAttribute attr[1]; int n = 0;
  if (cluster > 1) { attr[0].id = cudaLaunchAttributeClusterDimension; attr[0].val.clusterDim.x = cluster; attr[0].val.clusterDim.y = 1; attr[0].val.clusterDim.z = 1; n = 1; }
  cfg.attrs = attr; cfg.numAttrs = n;
  cudaEventRecord(a); cudaLaunchKernelEx(&cfg, body, d, spin); cudaEventRecord(b); cudaEventSynchronize(b);
  float ms; cudaEventElapsedTime(&ms, a, b); return ms * 1000.f;
}
int main() {
  cudaFuncSetAttribute(body, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
  int* d; cudaMalloc(&d, 4096);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (long long spin : {0LL, 20000LL, 100000LL}) {
    std::vector<float> p, c;
    for (int i = 0; i < 10; i++) { once(1, spin, d, a, b); once(2, spin, d, a, b); }
    for (int i = 0; i < 200; i++) { p.push_back(once(1, spin, d, a, b)); c.push_back(once(2, spin, d, a, b)); }
    std::sort(p.begin(), p.end()); std::sort(c.begin(), c.end());
    printf("spin %6lld ns: plain %.2f us, 2-CTA clusters %.2f us (medians of 200, events around one launch)\n", spin, p[100], c[100]);
  }
  printf("err: %s\n", cudaGetErrorString(cudaGetLastError()));
}
