//! Onboarding benchmark and the unified score.
//!
//! NVIDIA GPUs are measured by [`super::cuda`] (cuBLAS GEMM fp32/fp16/bf16, device copy,
//! pinned host-to-device copy; [`Device::Cuda`]). On a machine without a usable CUDA driver, or
//! with only declared GPUs, the CPU is measured and reported as such ([`Device::Cpu`]); GPU
//! numbers are never invented. AMD GPUs are not measured: there are no HIP kernels.
//!
//! **Score** (per GPU, dimensionless; orchestrators' matchers rank offers by it, it does not
//! set a price — `ganglion_market::matching`, objective keys 3–5):
//! `score = round(1000 × (fp32/F32_REF × mem/MEM_REF)^½)`, the geometric mean of matmul
//! throughput and memory bandwidth relative to an NVIDIA H100 SXM (67 TFLOP/s fp32 dense,
//! 3350 GB/s HBM3; NVIDIA H100 datasheet). An H100 scores 1000, an A100 SXM 421, one CPU core 0–3.
//! The result is signed with the provider's ed25519 attest key over its canonical JSON bytes.

use std::time::Instant;

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

/// Version of the onboarding benchmark (kernels, sizes and [`score`] formula) an offer's
/// measured score comes from (`ganglion_market::snapshot::Compute::Measured`): scores of
/// different versions are not comparable, so it changes whenever any of them does.
pub const BENCH_VERSION: u32 = 1;

/// fp32 matmul reference, TFLOP/s (H100 SXM, dense).
pub const F32_REF_TFLOPS: f64 = 67.0;
/// Memory bandwidth reference, GB/s (H100 SXM, HBM3).
pub const MEM_REF_GBPS: f64 = 3350.0;

/// What was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    /// The host CPU (single thread).
    Cpu,
    /// A CUDA device, by CUDA ordinal.
    Cuda(u32),
}

/// One benchmark run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// What ran it.
    pub device: Device,
    /// fp32 matrix multiply, TFLOP/s.
    pub fp32_tflops: f64,
    /// fp16 matrix multiply (fp32 accumulation), TFLOP/s; `None` where not measured (CPU).
    pub fp16_tflops: Option<f64>,
    /// bf16 matrix multiply (fp32 accumulation), TFLOP/s; `None` where not measured (CPU).
    #[serde(default)]
    pub bf16_tflops: Option<f64>,
    /// Memory bandwidth (copy, read + write bytes), GB/s (10^9 B/s).
    pub mem_gbps: f64,
    /// Host-to-device bandwidth, GB/s; `None` on the CPU.
    pub h2d_gbps: Option<f64>,
    /// Unified score, see the module docs.
    pub score: u32,
}

/// The unified score of a pair of measurements (see the module docs).
pub fn score(fp32_tflops: f64, mem_gbps: f64) -> u32 {
    let x = (fp32_tflops.max(0.0) / F32_REF_TFLOPS) * (mem_gbps.max(0.0) / MEM_REF_GBPS);
    (1000.0 * x.sqrt()).round().min(f64::from(u32::MAX)) as u32
}

/// Measures the CPU: an `n × n` fp32 matmul (i-k-j loop order) and a copy of `mem_mib` MiB.
pub fn measure_cpu(n: usize, mem_mib: usize) -> Measured {
    let a: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 * 0.5).collect();
    let b: Vec<f32> = (0..n * n).map(|i| (i % 5) as f32 * 0.25).collect();
    let mut c = vec![0f32; n * n];
    let t = Instant::now();
    for i in 0..n {
        for k in 0..n {
            let aik = a[i * n + k];
            let (row, brow) = (&mut c[i * n..(i + 1) * n], &b[k * n..(k + 1) * n]);
            for (cij, bkj) in row.iter_mut().zip(brow) {
                *cij += aik * bkj;
            }
        }
    }
    let secs = t.elapsed().as_secs_f64().max(1e-9);
    std::hint::black_box(&c);
    let fp32_tflops = 2.0 * (n as f64).powi(3) / secs / 1e12;
    let src = vec![1u8; mem_mib << 20];
    let mut dst = vec![0u8; mem_mib << 20];
    let t = Instant::now();
    dst.copy_from_slice(&src);
    let secs = t.elapsed().as_secs_f64().max(1e-9);
    std::hint::black_box(&dst);
    let mem_gbps = 2.0 * (mem_mib << 20) as f64 / secs / 1e9;
    Measured {
        device: Device::Cpu,
        fp32_tflops,
        fp16_tflops: None,
        bf16_tflops: None,
        mem_gbps,
        h2d_gbps: None,
        score: score(fp32_tflops, mem_gbps),
    }
}

/// The onboarding benchmark: every CUDA device ([`super::cuda::measure_all`]), or the CPU when
/// CUDA cannot run here (no driver, no cuBLAS, no device, or a failed check). Returns the
/// results and, when the CPU was measured instead, why (one line).
pub fn measure_onboarding(sizes: super::cuda::CudaSizes) -> (Vec<Measured>, Option<String>) {
    let why = match super::cuda::measure_all(sizes) {
        Ok(list) if !list.is_empty() => return (list, None),
        Ok(_) => "the CUDA driver reports no device".to_string(),
        Err(e) => e.to_string(),
    };
    (
        vec![measure_cpu(512, 256)],
        Some(format!(
            "GPU benchmark not run ({why}); measured the CPU instead"
        )),
    )
}

/// A benchmark result signed by the provider's attest key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignedBenchmark {
    /// The result.
    pub measured: Measured,
    /// The attest public key, 32 bytes.
    #[serde(with = "hex::serde")]
    pub key: [u8; 32],
    /// ed25519 signature over `serde_json::to_vec(&measured)`, 64 bytes.
    #[serde(with = "hex::serde")]
    pub signature: [u8; 64],
}

/// Why a signed benchmark does not verify.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The key bytes are not an ed25519 point.
    #[error("bad attest key: {0}")]
    Key(#[source] ed25519_dalek::SignatureError),
    /// The signature does not match.
    #[error("signature does not match the benchmark: {0}")]
    Signature(#[source] ed25519_dalek::SignatureError),
    /// The result could not be encoded.
    #[error("cannot encode the benchmark: {0}")]
    Encode(#[source] serde_json::Error),
}

impl SignedBenchmark {
    /// Signs `measured` with `key`.
    ///
    /// # Errors
    /// [`VerifyError::Encode`] if the result cannot be serialized (non-finite numbers).
    pub fn sign(measured: Measured, key: &SigningKey) -> Result<Self, VerifyError> {
        let bytes = serde_json::to_vec(&measured).map_err(VerifyError::Encode)?;
        Ok(Self {
            signature: key.sign(&bytes).to_bytes(),
            key: key.verifying_key().to_bytes(),
            measured,
        })
    }

    /// Checks the signature.
    ///
    /// # Errors
    /// [`VerifyError`] naming what failed.
    pub fn verify(&self) -> Result<(), VerifyError> {
        let key = VerifyingKey::from_bytes(&self.key).map_err(VerifyError::Key)?;
        let bytes = serde_json::to_vec(&self.measured).map_err(VerifyError::Encode)?;
        key.verify(&bytes, &Signature::from_bytes(&self.signature))
            .map_err(VerifyError::Signature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_gpu_scores_1000_and_score_grows_with_each_input() {
        assert_eq!(score(F32_REF_TFLOPS, MEM_REF_GBPS), 1000);
        assert!(score(2.0 * F32_REF_TFLOPS, MEM_REF_GBPS) > 1000);
        assert!(score(F32_REF_TFLOPS, MEM_REF_GBPS / 2.0) < 1000);
        assert_eq!(score(0.0, MEM_REF_GBPS), 0);
        // A100 SXM: 19.5 TFLOP/s fp32, 2039 GB/s.
        assert_eq!(score(19.5, 2039.0), 421);
    }

    #[test]
    fn cpu_measurement_is_labelled_cpu_with_no_gpu_numbers() {
        let m = measure_cpu(96, 8);
        assert_eq!(m.device, Device::Cpu);
        assert!(m.fp32_tflops > 0.0 && m.mem_gbps > 0.0);
        assert_eq!((m.fp16_tflops, m.h2d_gbps), (None, None));
        assert_eq!(m.score, score(m.fp32_tflops, m.mem_gbps));
    }

    #[test]
    fn signature_verifies_and_tampering_is_caught() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let m = Measured {
            device: Device::Cpu,
            fp32_tflops: 0.05,
            fp16_tflops: None,
            bf16_tflops: None,
            mem_gbps: 12.0,
            h2d_gbps: None,
            score: score(0.05, 12.0),
        };
        let mut s = SignedBenchmark::sign(m, &key).expect("finite");
        s.verify().expect("valid");
        s.measured.score += 1;
        assert!(matches!(s.verify(), Err(VerifyError::Signature(_))));
    }
}
