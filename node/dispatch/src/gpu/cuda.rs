//! NVIDIA benchmark kernels: cuBLAS GEMM in fp32, fp16 and bf16, device-to-device copy and
//! pinned host-to-device copy, timed with CUDA events.
//!
//! Through `cudarc` with `dynamic-loading`: `libcuda.so` and `libcublas.so` are opened at run
//! time, so the node builds, links and runs on machines without CUDA. Before touching either
//! library the module checks that it loads and otherwise returns [`CudaError::NoDriver`] or
//! [`CudaError::NoCublas`]; the caller then measures the CPU ([`super::bench::measure_cpu`]).
//! No number is ever estimated: every figure comes from a kernel whose output is checked.
//!
//! Method (per device, on its default stream):
//! - GEMM: `C = A·B` with `n × n` all-ones matrices (cuBLAS `Sgemm` for fp32, `GemmEx` with
//!   fp32 accumulation for fp16 and bf16); 2 warm-up calls, then `iters` timed calls;
//!   TFLOP/s = 2n³·iters / time. Every `C` element must be `n` within 1 % (`n` ≤ 8192 is a power
//!   of two, exact in all three types), else [`CudaError::WrongResult`]: a kernel that did not
//!   run, or ran wrong, never yields a number.
//! - Device memory: `cuMemcpyDtoDAsync` of `copy_mib` MiB, `iters` times; GB/s counts read +
//!   write bytes (2 × size), like the CPU copy.
//! - Host to device: `cuMemcpyHtoDAsync` from page-locked memory, `iters` times; GB/s counts
//!   the bytes once.

use std::sync::Arc;

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};

use super::bench::{Device, Measured, score};

/// Problem sizes of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CudaSizes {
    /// GEMM side `n` (matrices `n × n`); a power of two ≤ 8192 so the check is exact.
    pub gemm_n: usize,
    /// Bytes per copy, MiB.
    pub copy_mib: usize,
    /// Timed repetitions of each kernel.
    pub iters: u32,
}

impl CudaSizes {
    /// Onboarding: 8192² GEMMs (3 × 256 MiB in fp32), 1 GiB copies, 10 repetitions.
    pub const ONBOARDING: Self = Self {
        gemm_n: 8192,
        copy_mib: 1024,
        iters: 10,
    };
    /// Quick check for tests: 2048² GEMMs, 256 MiB copies, 5 repetitions.
    pub const QUICK: Self = Self {
        gemm_n: 2048,
        copy_mib: 256,
        iters: 5,
    };
}

/// Why the GPU could not be measured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CudaError {
    /// `libcuda.so` cannot be loaded: no NVIDIA driver here.
    #[error("no CUDA driver: libcuda.so could not be loaded")]
    NoDriver,
    /// The driver loads but `libcublas.so` does not.
    #[error(
        "no cuBLAS: libcublas.so could not be loaded (install cuBLAS from the CUDA toolkit or the nvidia-cublas-cu12 wheel)"
    )]
    NoCublas,
    /// A driver call failed.
    #[error("CUDA driver: {0}")]
    Driver(#[from] cudarc::driver::DriverError),
    /// A cuBLAS call failed.
    #[error("cuBLAS: {0:?}")]
    Cublas(#[from] cudarc::cublas::result::CublasError),
    /// A kernel's output is not what it must be: the measurement is discarded.
    #[error("{kernel} produced {got} where {want} was expected; measurement discarded")]
    WrongResult {
        /// Which kernel.
        kernel: &'static str,
        /// The value read back.
        got: f32,
        /// The value it must have.
        want: f32,
    },
    /// `gemm_n` not a power of two in 1..=8192, or a zero size.
    #[error("bad benchmark size: {0}")]
    Size(&'static str),
    /// cudarc panicked (e.g. a symbol missing from an old driver); caught at this boundary.
    #[error("CUDA binding panicked: {0}")]
    Panicked(String),
}

/// Whether `libcuda.so` loads on this machine.
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the library and drops it.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Measures every CUDA device (by CUDA ordinal). An empty list when the driver loads but
/// reports no device.
///
/// # Errors
/// [`CudaError::NoDriver`] / [`CudaError::NoCublas`] when a library is missing (measure the
/// CPU instead), or the first failure of a device.
pub fn measure_all(sizes: CudaSizes) -> Result<Vec<Measured>, CudaError> {
    check_sizes(sizes)?;
    if !driver_present() {
        return Err(CudaError::NoDriver);
    }
    // SAFETY: as above.
    if !unsafe { cudarc::cublas::sys::is_culib_present() } {
        return Err(CudaError::NoCublas);
    }
    guard(|| {
        let count = CudaContext::device_count()?;
        (0..usize::try_from(count).unwrap_or(0))
            .map(|ordinal| measure_device(ordinal, sizes))
            .collect()
    })
}

fn check_sizes(s: CudaSizes) -> Result<(), CudaError> {
    if !s.gemm_n.is_power_of_two() || s.gemm_n > 8192 {
        return Err(CudaError::Size("gemm_n must be a power of two ≤ 8192"));
    }
    if s.copy_mib == 0 || s.iters == 0 {
        return Err(CudaError::Size("copy_mib and iters must be > 0"));
    }
    Ok(())
}

/// Runs `f`, turning a panic inside the binding into [`CudaError::Panicked`].
fn guard<T>(f: impl FnOnce() -> Result<T, CudaError>) -> Result<T, CudaError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_string()))
            .unwrap_or_else(|| "unknown panic".into());
        Err(CudaError::Panicked(msg))
    })
}

fn measure_device(ordinal: usize, sizes: CudaSizes) -> Result<Measured, CudaError> {
    let ctx = CudaContext::new(ordinal)?;
    let stream = ctx.default_stream();
    let blas = CudaBlas::new(stream.clone())?;
    let n = sizes.gemm_n;
    let fp32 = gemm_tflops(
        &stream,
        &blas,
        n,
        sizes.iters,
        1f32,
        0f32,
        |x| x,
        "fp32 GEMM",
    )?;
    let fp16 = gemm_tflops(
        &stream,
        &blas,
        n,
        sizes.iters,
        half::f16::ONE,
        half::f16::ZERO,
        half::f16::to_f32,
        "fp16 GEMM",
    )?;
    let bf16 = gemm_tflops(
        &stream,
        &blas,
        n,
        sizes.iters,
        half::bf16::ONE,
        half::bf16::ZERO,
        half::bf16::to_f32,
        "bf16 GEMM",
    )?;
    let bytes = sizes.copy_mib << 20;
    let mem = dtod_gbps(&stream, bytes, sizes.iters)?;
    let h2d = h2d_gbps(&ctx, &stream, bytes, sizes.iters)?;
    Ok(Measured {
        device: Device::Cuda(u32::try_from(ordinal).unwrap_or(u32::MAX)),
        fp32_tflops: fp32,
        fp16_tflops: Some(fp16),
        bf16_tflops: Some(bf16),
        mem_gbps: mem,
        h2d_gbps: Some(h2d),
        score: score(fp32, mem),
    })
}

/// Milliseconds between two events recorded around `work` on `stream`.
fn timed(
    stream: &Arc<CudaStream>,
    work: impl FnOnce() -> Result<(), CudaError>,
) -> Result<f64, CudaError> {
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let start = stream.record_event(flags)?;
    work()?;
    let end = stream.record_event(flags)?;
    Ok(f64::from(start.elapsed_ms(&end)?).max(1e-6))
}

#[allow(clippy::too_many_arguments)]
fn gemm_tflops<T>(
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    n: usize,
    iters: u32,
    one: T,
    zero: T,
    to_f32: fn(T) -> f32,
    kernel: &'static str,
) -> Result<f64, CudaError>
where
    T: DeviceRepr + ValidAsZeroBits + Copy + Default,
    CudaBlas: Gemm<T>,
{
    let host = vec![one; n * n];
    let a = stream.clone_htod(&host)?;
    let b = stream.clone_htod(&host)?;
    let mut c: CudaSlice<T> = stream.alloc_zeros(n * n)?;
    let side = i32::try_from(n).map_err(|_| CudaError::Size("gemm_n too large"))?;
    let cfg = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_N,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: side,
        n: side,
        k: side,
        alpha: one,
        lda: side,
        ldb: side,
        beta: zero,
        ldc: side,
    };
    // SAFETY: a, b and c hold n × n elements, matching m = n = k = lda = ldb = ldc = n.
    let mut run = || unsafe { blas.gemm(cfg, &a, &b, &mut c) };
    run()?;
    run()?;
    let ms = timed(stream, || {
        for _ in 0..iters {
            run()?;
        }
        Ok(())
    })?;
    let out: Vec<T> = stream.clone_dtoh(&c)?;
    let want = n as f32;
    if let Some(&bad) = out
        .iter()
        .find(|&&x| (to_f32(x) - want).abs() > want * 0.01)
    {
        return Err(CudaError::WrongResult {
            kernel,
            got: to_f32(bad),
            want,
        });
    }
    let flops = 2.0 * (n as f64).powi(3) * f64::from(iters);
    Ok(flops / (ms / 1e3) / 1e12)
}

fn dtod_gbps(stream: &Arc<CudaStream>, bytes: usize, iters: u32) -> Result<f64, CudaError> {
    let src = stream.clone_htod(&vec![7u8; bytes])?;
    let mut dst: CudaSlice<u8> = stream.alloc_zeros(bytes)?;
    stream.memcpy_dtod(&src, &mut dst)?;
    let ms = timed(stream, || {
        for _ in 0..iters {
            stream.memcpy_dtod(&src, &mut dst)?;
        }
        Ok(())
    })?;
    check_bytes(stream, &dst, 7, "device-to-device copy")?;
    Ok(2.0 * bytes as f64 * f64::from(iters) / (ms / 1e3) / 1e9)
}

fn h2d_gbps(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    bytes: usize,
    iters: u32,
) -> Result<f64, CudaError> {
    // SAFETY: the memory is written (filled) before any read.
    let mut host = unsafe { ctx.alloc_pinned_with_flags::<u8>(bytes, 0) }?;
    host.as_mut_slice()?.fill(9);
    let mut dst: CudaSlice<u8> = stream.alloc_zeros(bytes)?;
    stream.memcpy_htod(&host, &mut dst)?;
    let ms = timed(stream, || {
        for _ in 0..iters {
            stream.memcpy_htod(&host, &mut dst)?;
        }
        Ok(())
    })?;
    check_bytes(stream, &dst, 9, "host-to-device copy")?;
    Ok(bytes as f64 * f64::from(iters) / (ms / 1e3) / 1e9)
}

/// Reads back the first and last 4 KiB of `dst` and checks every byte is `want`.
fn check_bytes(
    stream: &Arc<CudaStream>,
    dst: &CudaSlice<u8>,
    want: u8,
    kernel: &'static str,
) -> Result<(), CudaError> {
    let len = dst.len();
    let edge = len.min(4096);
    for range in [0..edge, len - edge..len] {
        let back: Vec<u8> = stream.clone_dtoh(&dst.slice(range))?;
        if let Some(&bad) = back.iter().find(|&&b| b != want) {
            return Err(CudaError::WrongResult {
                kernel,
                got: f32::from(bad),
                want: f32::from(want),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_checked_before_any_library_is_touched() {
        let bad = CudaSizes {
            gemm_n: 3000,
            ..CudaSizes::QUICK
        };
        assert!(matches!(measure_all(bad), Err(CudaError::Size(_))));
        let zero = CudaSizes {
            iters: 0,
            ..CudaSizes::QUICK
        };
        assert!(matches!(measure_all(zero), Err(CudaError::Size(_))));
    }

    #[test]
    fn a_missing_driver_is_a_typed_error_not_a_panic() {
        if driver_present() {
            eprintln!(
                "SKIPPED a_missing_driver_is_a_typed_error_not_a_panic: libcuda.so loads on this \
                 machine, so the no-driver path cannot be observed here"
            );
            return;
        }
        assert!(matches!(
            measure_all(CudaSizes::QUICK),
            Err(CudaError::NoDriver)
        ));
    }
}
