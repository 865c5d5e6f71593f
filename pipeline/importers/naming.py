"""The default names of regions and counters, the same for every format (docs/import.md)."""

from __future__ import annotations


class C:
    """Counter and region names the importers emit; ``--rename old=new`` changes any of them."""

    KERNELS = "kernels"  # kernels executed (GPU side) / profiled kernel launches (ncu)
    KERNEL_LAUNCHES = "kernel_launches"  # kernel-launch API calls (CPU side)
    GRAPH_LAUNCHES = "graph_launches"  # CUDA/HIP graph launches
    MEMCPY_COUNT = "memcpy_count"
    MEMCPY_BYTES = "memcpy_bytes"
    MEMSET_COUNT = "memset_count"
    MEMSET_BYTES = "memset_bytes"
    SYNCS = "syncs"  # *Synchronize API calls
    ATEN_OPS = "aten_ops"  # cpu_op events (Kineto)
    DRAM_BYTES_READ = "dram_bytes_read"
    DRAM_BYTES_WRITE = "dram_bytes_write"
    DRAM_BYTES = "dram_bytes"
    L2_BYTES = "l2_bytes"
    KERNEL_SECONDS = "kernel_seconds"  # ncu gpu__time_duration.sum: replayed, not wall time
    OP_PREFIX = "op:"  # msprof: executions per operator type, e.g. op:MatMul
    GPU_PREFIX = "gpu:"  # GPU time of the kernels launched inside an annotation
    GPU_BUSY = "gpu_busy"  # union of kernel intervals of a step, across streams
    NPU_BUSY = "npu_busy"  # union of NPU task intervals of a step (torch_npu kernel_details)


KERNEL_LAUNCH_APIS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cudaLaunchCooperativeKernelMultiDevice",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cuLaunchCooperativeKernel",
        "hipLaunchKernel",
        "hipExtLaunchKernel",
        "hipLaunchCooperativeKernel",
        "hipModuleLaunchKernel",
        "hipExtModuleLaunchKernel",
    }
)
GRAPH_LAUNCH_APIS = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"})
SYNC_SUFFIX = "Synchronize"  # cudaDeviceSynchronize, cuStreamSynchronize, hipEventSynchronize…
API_SUFFIX = r"(_v\d+|_ptsz|_ptds)+$"
"""Version and per-thread-stream suffixes of API names in nsys (``cudaLaunchKernel_v7000``)."""
