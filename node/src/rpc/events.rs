//! `job_subscribe`: a job's transitions streamed over WebSocket. The job store is read every
//! [`POLL`]; each transition not yet sent becomes a `job_event` notification, until every
//! record of the job is terminal (then the server closes the subscription with jsonrpsee's
//! close notification, `params.error` naming the job) or the client goes away.

use std::time::Duration;

use ganglion_rpc::error::{self, error};
use ganglion_rpc::jsonrpsee::PendingSubscriptionSink;
use ganglion_rpc::jsonrpsee::core::SubscriptionResult;
use ganglion_rpc::types::{JobEvent, JobTx};

use super::{Api, codes, jobs_of, name, parse_job_id};
use crate::job::JobControl;
use crate::job::store::JobRecord;

/// How often the store is read for new transitions.
pub(super) const POLL: Duration = Duration::from_millis(200);

/// The transitions of `r` from index `from` on, as events.
fn events_of<S: Copy + serde::Serialize, D>(
    role: &str,
    r: &JobRecord<S, D>,
    from: usize,
    terminal: impl Fn(S) -> bool,
) -> Vec<JobEvent> {
    let txs: Vec<JobTx> = r
        .intents
        .iter()
        .map(|i| JobTx {
            kind: name(&i.kind),
            tx_id: hex::encode(i.tx_hash),
        })
        .collect();
    r.history
        .iter()
        .skip(from)
        .map(|t| JobEvent {
            job_id: hex::encode(r.job_id.0),
            role: role.to_string(),
            state: name(&t.state),
            at_ms: t.at_ms,
            slot: t.slot,
            txs: txs.clone(),
            terminal: terminal(t.state),
        })
        .collect()
}

/// New events since `sent` (transitions already sent per role), and whether every record
/// is terminal.
fn poll(
    jobs: &dyn JobControl,
    job: &ganglion_contracts::v2::datum::JobId,
    sent: &mut [usize; 2],
) -> Result<(Vec<JobEvent>, bool), crate::job::EngineError> {
    let (o, p) = jobs.records(job)?;
    let mut out = Vec::new();
    let mut done = o.is_some() || p.is_some();
    if let Some(o) = o {
        out.extend(events_of("orchestrator", &o, sent[0], |s| s.is_terminal()));
        sent[0] = o.history.len();
        done &= o.state.is_terminal();
    }
    if let Some(p) = p {
        out.extend(events_of("provider", &p, sent[1], |s| s.is_terminal()));
        sent[1] = p.history.len();
        done &= p.state.is_terminal();
    }
    Ok((out, done))
}

/// `job_subscribe` (`ganglion_rpc::api::JobApi`).
pub(super) async fn subscribe(
    api: &Api,
    pending: PendingSubscriptionSink,
    job_id: String,
) -> SubscriptionResult {
    {
        let job = match parse_job_id(&job_id) {
            Ok(j) => j,
            Err(e) => {
                pending.reject(e).await;
                return Ok(());
            }
        };
        let jobs = match jobs_of(api) {
            Ok(j) => j.clone(),
            Err(e) => {
                pending.reject(e).await;
                return Ok(());
            }
        };
        match jobs.records(&job) {
            Ok((None, None)) => {
                pending
                    .reject(error(error::JOB, format!("unknown job {job_id}")))
                    .await;
                return Ok(());
            }
            Err(e) => {
                pending.reject(codes::engine(&e)).await;
                return Ok(());
            }
            Ok(_) => {}
        }
        let sink = pending.accept().await?;
        let mut sent = [0usize; 2];
        loop {
            let (events, done) = poll(jobs.as_ref(), &job, &mut sent)?;
            for e in &events {
                let raw = serde_json::value::to_raw_value(e)?;
                sink.send(raw).await?;
            }
            if done {
                // jsonrpsee's close form: a last `job_event` with `error` in place of
                // `result`; clients end the stream on it.
                return Err(format!("job {job_id} ended: every record is terminal").into());
            }
            tokio::select! {
                () = sink.closed() => return Ok(()),
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }
}
