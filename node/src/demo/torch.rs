//! The PyTorch workload: `examples/workloads/ddp_train.py` (compiled into the binary) trained
//! by every rank of a job in the CPU torch image (`scripts/build-torch-image.sh`, cached by
//! tag), and the rank checksums read back from the providers' logs.
//!
//! The executor runs one container per provider with `LOCAL_WORLD_SIZE` = its GPUs and `RANK`
//! = its first global rank (see [`ganglion_dispatch::executor::rendezvous`]); the image's
//! `torch.distributed.run` fails on its own arguments (torch 1.13, Python 3.11), so a POSIX
//! shell starts one `python3 -c "$DDP_TRAIN_PY"` per local rank and fails when any fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::DemoError;
use ganglion_market::spec::Ensemble;

/// The training script, as in the checkout.
pub const DDP_TRAIN_PY: &str = include_str!("../../../examples/workloads/ddp_train.py");

/// The torch image's default tag (the build script's).
pub const TORCH_IMAGE: &str = "ganglion/torch-cpu:bookworm-1";

/// The container's launcher: one process per local rank, global rank `RANK + l`.
const LAUNCHER: &str = "rc=0; pids=''; base=$RANK; l=0; \
    while [ $l -lt ${LOCAL_WORLD_SIZE:-1} ]; do \
      RANK=$((base + l)) LOCAL_RANK=$l python3 -c \"$DDP_TRAIN_PY\" & pids=\"$pids $!\"; \
      l=$((l + 1)); \
    done; \
    for p in $pids; do wait $p || rc=1; done; exit $rc";

/// A DDP job: `nodes` × `gpus_per_node` ranks of `ddp_train.py` in `image` (gloo over the
/// job network), `epochs` epochs of `samples` samples; rate ceiling `max_rate` NTX per
/// GPU-hour, `budget_ntx` locked, deadline `deadline_ms` (POSIX ms), `max_duration_s` per run.
///
/// # Errors
/// [`DemoError::Chain`] when the spec does not validate (the fixed fields always do).
#[allow(clippy::too_many_arguments)]
pub fn ensemble(
    image: &str,
    nodes: u32,
    gpus_per_node: u32,
    epochs: u32,
    max_rate: u64,
    budget_ntx: u64,
    max_duration_s: u64,
    deadline_ms: u64,
) -> Result<Ensemble, DemoError> {
    let json = serde_json::json!({
        "image": { "local": image },
        "command": ["sh", "-c", LAUNCHER],
        "env": {
            "DDP_TRAIN_PY": DDP_TRAIN_PY,
            "TRAIN_EPOCHS": epochs.to_string(),
            "TRAIN_SAMPLES": "1024",
            "DDP_TIMEOUT": "90",
            "HOME": "/tmp",
        },
        "gpus": { "count": nodes * gpus_per_node },
        "placement": {
            "min_gpus_per_node": gpus_per_node,
            "max_gpus_per_node": gpus_per_node,
            "max_nodes": nodes,
        },
        "distributed": { "framework": "torch" },
        "limits": { "max_duration_s": max_duration_s, "max_rate_ntx_per_gpu_hour": max_rate },
        "budget_ntx": budget_ntx,
        "deadline_ms": deadline_ms,
    });
    Ensemble::from_json_str(&json.to_string()).map_err(DemoError::chain)
}

/// Builds (about 3 minutes, once) or finds the torch image with
/// `scripts/build-torch-image.sh`, calling `progress` with each line the build prints.
/// Returns its tag.
///
/// # Errors
/// [`DemoError::Image`] with the script's last lines.
pub fn image(mut progress: impl FnMut(&str)) -> Result<String, DemoError> {
    use std::io::BufRead;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/build-torch-image.sh");
    let mut child = Command::new("bash")
        .arg(&script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| DemoError::Image(format!("{}: {e}", script.display()).into()))?;
    let stderr = child.stderr.take();
    let mut tail: Vec<String> = Vec::new();
    if let Some(err) = stderr {
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            progress(&line);
            tail.push(line);
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|e| DemoError::Image(e.into()))?;
    if !out.status.success() {
        let from = tail.len().saturating_sub(20);
        return Err(DemoError::Image(tail[from..].join("\n").into()));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or(TORCH_IMAGE)
        .trim()
        .to_string())
}

/// Every `[rank R] checksum=<hex>` line in `log`, as `(R, hex)`.
pub fn checksums(log: &str) -> Vec<(u32, String)> {
    log.lines()
        .filter_map(|l| {
            let rest = l.split("[rank ").nth(1)?;
            let (rank, rest) = rest.split_once(']')?;
            let sum = rest.split("checksum=").nth(1)?.split_whitespace().next()?;
            Some((rank.trim().parse().ok()?, sum.to_string()))
        })
        .collect()
}

/// The executor's kept artifacts dirs under a provider's data dir for chain job `job_hex`
/// (`work/jobs/<first 40 hex>-n<rank>/artifacts`: logs, CARs, `report.json`).
pub fn artifact_dirs(data_dir: &Path, job_hex: &str) -> Vec<PathBuf> {
    let prefix = &job_hex[..job_hex.len().min(40)];
    let Ok(jobs) = std::fs::read_dir(data_dir.join("work").join("jobs")) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = jobs
        .flatten()
        .filter(|j| j.file_name().to_string_lossy().starts_with(prefix))
        .map(|j| j.path().join("artifacts"))
        .filter(|d| d.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// The rank logs (`rank-*.log`) in an artifacts dir.
pub fn logs_in(dir: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|files| {
            files
                .flatten()
                .map(|f| f.path())
                .filter(|p| p.extension().is_some_and(|e| e == "log"))
                .collect()
        })
        .unwrap_or_default();
    logs.sort();
    logs
}

/// The rank logs the executor kept under a provider's data dir for chain job `job_hex`.
pub fn rank_logs(data_dir: &Path, job_hex: &str) -> Vec<PathBuf> {
    artifact_dirs(data_dir, job_hex)
        .iter()
        .flat_map(|d| logs_in(d))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ensemble_validates_and_asks_for_two_by_two() {
        let e = ensemble(
            TORCH_IMAGE,
            2,
            2,
            2,
            3_600_000,
            2_000_000,
            300,
            u64::MAX / 2,
        )
        .expect("valid");
        assert_eq!(e.gpus.count, 4);
        assert_eq!(e.env["DDP_TRAIN_PY"], DDP_TRAIN_PY);
        assert_eq!(e.command[0], "sh");
    }

    #[test]
    fn checksums_come_from_the_rank_lines() {
        let log = "[rank 0] epoch 1 loss 0.1\n[rank 1] checksum=abc123 accuracy=0.9 agree=True\n\
                   noise\n[rank 0] checksum=abc123 accuracy=0.9 agree=True\n";
        assert_eq!(
            checksums(log),
            vec![(1, "abc123".to_string()), (0, "abc123".to_string())]
        );
        assert!(checksums("[rank x] checksum=1").is_empty());
    }
}
