//! `ganglion audit job|provider|verify`: the chain's record of a job or a provider, and a job
//! re-verified from chain and IPFS only, asked of a running node over JSON-RPC
//! (`audit_job`, `audit_provider`, `audit_verify`).

use ganglion_rpc::audit::{AuditJob, AuditProvider, AuditReport};

use super::remote::{RemoteArgs, call, print_json};
use ganglion_rpc::api::AuditApiClient;

/// Audit jobs and providers (a running node answers: `ganglion node run`).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub remote: RemoteArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Audit subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// A job as the chain records it: providers, GPUs, spec, results, logs, payments, txs.
    Job {
        /// Job id (64 hex digits).
        job_id: String,
    },
    /// A provider's bonds, jobs, earnings, defaults and slashes.
    Provider {
        /// Payment key hash (56 hex digits) or libp2p peer id.
        key: String,
    },
    /// Re-derive a job from chain and IPFS only; exits non-zero when a check fails.
    Verify {
        /// Job id (64 hex digits).
        job_id: String,
    },
}

fn print_job(j: &AuditJob) {
    println!("job {}: {}", j.job_id, j.status);
    println!("  orchestrator {}", j.orchestrator);
    println!("  spec {}", j.spec);
    println!(
        "  {} GPUs, budget {} NTX, max rate {} NTX/GPU-h, deadline {} ms",
        j.gpus, j.budget, j.max_rate, j.deadline_ms
    );
    for (i, a) in j.assignments.iter().enumerate() {
        println!(
            "  [{i}] provider {}: {} GPUs at {} NTX/GPU-h, paid {}",
            a.provider,
            a.gpus,
            a.rate,
            a.paid.map_or("-".to_string(), |p| format!("{p} NTX"))
        );
        if let Some(t) = &a.attestation {
            println!(
                "      {} GPU-ms, exit {}, result {}, logs {}",
                t.gpu_ms, t.exit_code, t.result, t.logs
            );
        }
    }
    if let Some(r) = j.refund {
        println!("  refund {r} NTX");
    }
    for t in &j.txs {
        println!("  {} {} (slot {})", t.kind, t.tx_id, t.slot);
    }
}

fn print_provider(p: &AuditProvider) {
    println!("provider {}", p.provider);
    for b in &p.bonds {
        println!(
            "  bond {}: {} NTX for {} GPUs ({} free){}",
            b.bond,
            b.stake,
            b.gpus,
            b.free_gpus,
            b.unbonding_since_ms
                .map_or(String::new(), |s| format!(", unbonding since {s} ms"))
        );
    }
    println!(
        "  {} jobs, earned {} NTX, {} defaults, slashed {} NTX",
        p.jobs.len(),
        p.earnings,
        p.defaults.len(),
        p.slashed
    );
}

/// Runs the subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let config = args.remote.config.as_deref();
    match args.command {
        Command::Job { job_id } => {
            let j: AuditJob = call(config, |rpc| async move {
                AuditApiClient::job(&rpc, job_id).await
            })?;
            if args.remote.json {
                print_json(&j)?
            } else {
                print_job(&j)
            }
        }
        Command::Provider { key } => {
            let p: AuditProvider = call(config, |rpc| async move {
                AuditApiClient::provider(&rpc, key).await
            })?;
            if args.remote.json {
                print_json(&p)?
            } else {
                print_provider(&p)
            }
        }
        Command::Verify { job_id } => {
            let r: AuditReport = call(config, |rpc| async move {
                AuditApiClient::verify(&rpc, job_id).await
            })?;
            if args.remote.json {
                print_json(&r)?;
            } else {
                for c in &r.checks {
                    let mark = if c.pass { "pass" } else { "FAIL" };
                    println!("{mark}  {:<16} {}", c.name, c.detail);
                }
            }
            let failed = r.checks.iter().filter(|c| !c.pass).count();
            if !r.pass {
                anyhow::bail!(
                    "job {}: {failed} of {} checks failed",
                    r.job_id,
                    r.checks.len()
                );
            }
            if !args.remote.json {
                println!("job {}: all {} checks pass", r.job_id, r.checks.len());
            }
        }
    }
    Ok(())
}
