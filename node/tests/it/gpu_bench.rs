//! The CUDA benchmark kernels on a real GPU. Runs them when `libcuda.so` loads; otherwise says
//! loudly that it was skipped and checks the typed no-driver error and the CPU fallback instead.

use ganglion_dispatch::gpu::bench::{self, Device};
use ganglion_dispatch::gpu::cuda::{self, CudaError, CudaSizes};

#[test]
fn cuda_benchmark_measures_every_device_or_falls_back_to_the_cpu() {
    match cuda::measure_all(CudaSizes::QUICK) {
        Err(CudaError::NoDriver) => {
            eprintln!(
                "SKIPPED cuda_benchmark_measures_every_device_or_falls_back_to_the_cpu (GPU part): \
                 no CUDA driver (libcuda.so does not load) on this machine, so the cuBLAS GEMM and \
                 copy kernels were not run; checking the CPU fallback only"
            );
            let (results, note) = bench::measure_onboarding(CudaSizes::QUICK);
            let note = note.expect("the fallback says why");
            assert!(note.contains("no CUDA driver"), "{note}");
            assert_eq!(results.len(), 1);
            assert_eq!(results[0].device, Device::Cpu);
            assert_eq!((results[0].fp16_tflops, results[0].h2d_gbps), (None, None));
        }
        Err(CudaError::NoCublas) => eprintln!(
            "SKIPPED cuda_benchmark_measures_every_device_or_falls_back_to_the_cpu: the CUDA \
             driver loads but libcublas.so does not; install cuBLAS to run the GEMM kernels"
        ),
        Err(e) => panic!("a CUDA driver is present but the benchmark failed: {e}"),
        Ok(results) => {
            assert!(!results.is_empty(), "driver present but no device measured");
            for m in &results {
                eprintln!("measured: {m:?}");
                assert!(matches!(m.device, Device::Cuda(_)));
                assert!(m.fp32_tflops > 0.0 && m.mem_gbps > 0.0, "{m:?}");
                assert!(m.fp16_tflops.is_some_and(|t| t > 0.0), "{m:?}");
                assert!(m.bf16_tflops.is_some_and(|t| t > 0.0), "{m:?}");
                assert!(m.h2d_gbps.is_some_and(|g| g > 0.0), "{m:?}");
                assert_eq!(m.score, bench::score(m.fp32_tflops, m.mem_gbps));
            }
        }
    }
}
