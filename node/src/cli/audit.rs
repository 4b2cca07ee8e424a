//! `ganglion audit job|provider|verify|cid`: the chain's record of a job or a provider, a job
//! re-verified from chain and IPFS only, and where the record names a CID, asked of a running
//! node over JSON-RPC (`audit_job`, `audit_provider`, `audit_verify`, `audit_cid`).

use ganglion_rpc::amount::ntx_text;
use ganglion_rpc::audit::{AuditCidUse, AuditJob, AuditProvider, AuditReport};

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
    /// Where the chain's record names a CID: jobs whose lock pins it as the spec, claims
    /// that attest it as a result or log.
    Cid {
        /// The CID (CIDv0 `Qm…` or CIDv1).
        cid: String,
    },
}

fn print_job(j: &AuditJob) {
    println!("job {}: {}", j.job_id, j.status);
    println!("  orchestrator {}", j.orchestrator);
    println!("  spec {}", j.spec);
    println!(
        "  {} GPUs, budget {}, max rate {}/GPU-h, deadline {} ms",
        j.gpus,
        ntx_text(j.budget.get()),
        ntx_text(j.max_rate.get()),
        j.deadline_ms
    );
    for (i, a) in j.assignments.iter().enumerate() {
        println!(
            "  [{i}] provider {}: {} GPUs at {}/GPU-h, paid {}",
            a.provider,
            a.gpus,
            ntx_text(a.rate.get()),
            a.paid.map_or("-".to_string(), |p| ntx_text(p.get()))
        );
        if let Some(t) = &a.attestation {
            println!(
                "      {} GPU-ms, exit {}, result {}, logs {}",
                t.gpu_ms, t.exit_code, t.result, t.logs
            );
        }
    }
    if let Some(r) = j.refund {
        println!("  refund {}", ntx_text(r.get()));
    }
    for t in &j.txs {
        println!(
            "  {} {} (block {}, slot {}, fee {} lovelace)",
            t.kind,
            t.tx_id,
            t.block,
            t.slot,
            t.fee.get()
        );
    }
}

fn print_provider(p: &AuditProvider) {
    println!("provider {}", p.provider);
    for b in &p.bonds {
        println!(
            "  bond {}: {} for {} GPUs ({} free){}",
            b.bond,
            ntx_text(b.stake.get()),
            b.gpus,
            b.free_gpus,
            b.unbonding_since_ms
                .map_or(String::new(), |s| format!(", unbonding since {s} ms"))
        );
    }
    println!(
        "  {} jobs, earned {}, {} defaults, slashed {}",
        p.jobs.len(),
        ntx_text(p.earnings.get()),
        p.defaults.len(),
        ntx_text(p.slashed.get())
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
        Command::Cid { cid } => {
            let uses: Vec<AuditCidUse> =
                call(
                    config,
                    |rpc| async move { AuditApiClient::cid(&rpc, cid).await },
                )?;
            if args.remote.json {
                print_json(&uses)?
            } else if uses.is_empty() {
                println!("no lock or claim on chain names it");
            } else {
                for u in &uses {
                    match (u.index, &u.provider) {
                        (Some(i), Some(p)) => println!(
                            "job {}: {} of node {i} (provider {p}), slot {}",
                            u.job_id, u.field, u.slot
                        ),
                        _ => println!("job {}: {}, slot {}", u.job_id, u.field, u.slot),
                    }
                }
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
