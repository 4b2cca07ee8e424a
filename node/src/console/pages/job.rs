//! `/jobs/{id}`: one job as this node and the chain know it. The node's records
//! (`job_status`: states with times, its transactions, each provider's share, the plan's
//! measured links) form the live part ([`live`], refreshed by the page's script on every
//! transition); the chain's trail (`audit_job`: spec CID, assignment, claims, payments,
//! refund, each transaction's block, slot and fee) follows, and once the escrow is closed,
//! `audit_verify` check by check.

use maud::{Markup, html};

use ganglion_jobs::state::{OrchestratorState, ProviderState};
use ganglion_rpc::audit::{AuditJob, AuditReport, MatrixPair};
use ganglion_rpc::types::{JobService, JobStatus};

use super::super::html::{self as h, amount};
use super::super::source::{Source, SourceError};

/// Whether a record's `state` (snake_case, as `job_status` gives it) is final for its `role`.
pub fn is_terminal(role: &str, state: &str) -> bool {
    let v = serde_json::Value::from(state);
    match role {
        "orchestrator" => {
            serde_json::from_value::<OrchestratorState>(v).is_ok_and(OrchestratorState::is_terminal)
        }
        _ => serde_json::from_value::<ProviderState>(v).is_ok_and(ProviderState::is_terminal),
    }
}

/// Whether the escrow is closed on chain (`audit_job`'s status), so its audit can be final.
fn escrow_closed(a: &AuditJob) -> bool {
    matches!(a.status.as_str(), "claimed" | "cancelled" | "expired")
}

/// The page, or `None` when neither the node nor the chain knows the job (a 404).
///
/// # Errors
/// A malformed job id ([`SourceError::is_not_found`]).
pub async fn render(source: &Source, id: &str, has_token: bool) -> Result<Markup, SourceError> {
    let records = source.job(id).await?;
    known(source, id, &records).await?;
    let live_part = live(source, id, &records).await;
    let can_stop = records
        .iter()
        .any(|r| r.role == "orchestrator" && !is_terminal(&r.role, &r.state));
    let body = html! {
        h1 { "Job " (h::short(id)) }
        p.full { code data-full=(id) { (id) } }
        div #live data-job=(id) { (live_part) }
        @if can_stop {
            section.actions {
                h2 { "Stop" }
                form method="post" action={ "/jobs/" (id) "/stop" } {
                    p { "Stops the job: its providers stop their containers and claim the work acknowledged; the rest is refunded." }
                    @if !has_token {
                        label { "RPC token (" code { "<data dir>/rpc.cookie" } ") "
                            input type="password" name="token" autocomplete="current-password" required; }
                    }
                    button type="submit" { "Stop job" }
                }
            }
        }
    };
    Ok(h::page(
        &format!("Job {}", &id[..id.len().min(8)]),
        "/jobs",
        body,
    ))
}

/// `Ok` when this node holds a record of the job or the chain knows it; else the chain's
/// "unknown job" error ([`SourceError::is_not_found`]: a 404).
///
/// # Errors
/// As above; another failure of `audit_job` (no chain) is not an error here.
pub async fn known(source: &Source, id: &str, records: &[JobStatus]) -> Result<(), SourceError> {
    if !records.is_empty() {
        return Ok(());
    }
    match source.audit_job(id).await {
        Err(e) if e.is_not_found() => Err(e),
        _ => Ok(()),
    }
}

/// The part the page's script replaces on every transition (`/jobs/{id}/live`).
pub async fn live(source: &Source, id: &str, records: &[JobStatus]) -> Markup {
    let chain = source.audit_job(id).await;
    let terminal = !records.is_empty() && records.iter().all(|r| is_terminal(&r.role, &r.state));
    let verify = match &chain {
        Ok(a) if escrow_closed(a) => Some(source.verify(id).await),
        _ => None,
    };
    html! {
        div #live-inner data-terminal=(terminal) {
            @if records.is_empty() {
                p.notice { "This node holds no record of the job; the chain's view follows." }
            }
            @for r in records { (record(r)) }
            @match &chain {
                Ok(a) => (chain_trail(a)),
                Err(e) => (h::unavailable("The chain's record", e)),
            }
            @if let Some(v) = &verify {
                @match v {
                    Ok(report) => (audit(report)),
                    Err(e) => (h::unavailable("The audit", e)),
                }
            }
        }
    }
}

fn record(r: &JobStatus) -> Markup {
    html! {
        section.record data-role=(r.role) {
            h2 { "As " (r.role) ": " span data-current-state=(r.state) { (h::state(&r.state)) }
                @if let Some(o) = &r.outcome { " " span.tag.outcome data-outcome=(o) { (o) } } }
            @if let Some(e) = &r.last_error { p.error { "Last problem: " (e) } }
            @if let Some(s) = &r.successor { p.notice { "Its network did not form; matched again as " (h::job_link(s)) "." } }
            @if let Some(p) = &r.predecessor { p.notice { "Matches again the job " (h::job_link(p)) ", whose network did not form." } }
            @if let Some(s) = &r.service { (service(s)) }
            h3 { "Timeline" }
            ol.timeline {
                @for t in &r.history {
                    li data-state=(t.state) { (h::time(t.at_ms)) " " (h::state(&t.state)) }
                }
            }
            @if !r.txs.is_empty() {
                h3 { "Transactions submitted by this node" }
                ul.txs { @for t in &r.txs { li { (t.kind) " " (h::short(&t.tx_id)) } } }
            }
            @if !r.nodes.is_empty() {
                h3 { "Providers" }
                (h::table(&["Rank", "Provider", "GPUs", "State", "Exit", "GPU-ms", "Paid", "Log", "Why"], html! {
                    @for n in &r.nodes {
                        tr.node data-index=(n.index) {
                            td { (n.index) }
                            td { (h::provider_link(&n.provider)) }
                            td { (n.gpus) }
                            td { (h::state(&n.state)) }
                            td.exit { @if let Some(c) = n.exit_code { (c) } @else { "—" } }
                            td.gpu-ms { @if let Some(g) = n.gpu_ms { span data-v=(g) { (h::grouped(g)) } } @else { "—" } }
                            td.paid { @if let Some(p) = n.paid { (amount(p.get(), "NTX")) } @else { "—" } }
                            td { @if let Some(l) = &n.logs { (h::cid_short(l, true, Some("log.txt"))) } @else { "—" } }
                            td { @if let Some(w) = &n.reason { (w) }
                                 @if let Some(u) = n.released_until_ms { "released: paid until " (h::time(u)) }
                                 @if let Some(u) = &n.usage { span.usage data-requests=(u.requests) {
                                     " served " (u.requests) " requests (" (u.failed) " failed), "
                                     (u.bytes_in) " B in, " (u.bytes_out) " B out" } } }
                        }
                    }
                }))
                p { a href={ "/jobs/" (r.job_id) "/logs" } { "Every rank's log" } " · "
                    a href={ "/jobs/" (r.job_id) "/outputs" } { "Outputs" } }
            }
            @if !r.links.is_empty() { (links(&r.links)) }
        }
    }
}

/// A service's replicas, its load at this node's gateway and its cost so far.
fn service(s: &JobService) -> Markup {
    let ms = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.1} ms"));
    html! {
        section.service data-running=(s.running.len()) data-wanted=(s.wanted) {
            h3 { "Service" }
            p { "Routed at " code { "/" (s.name) "/" } " on this node's gateway: "
                (s.running.len()) " of " (s.wanted) " replicas wanted running; cost so far "
                (amount(s.cost_so_far.get(), "NTX")) "." }
            @if let Some(per_1k) = &s.cost_per_1k_requests {
                p.requests data-requests=(s.requests) { (s.requests) " requests answered (signed with the receipts): "
                    (amount(per_1k.get(), "NTX")) " per 1 000 requests." }
            }
            @if let Some(l) = &s.load {
                (h::table(&["Healthy", "In flight", "Requests/s", "p50", "p90"], html! {
                    tr.load {
                        td { (l.healthy) } td { (l.in_flight) }
                        td { (format!("{:.1}", l.requests_per_s)) }
                        td { (ms(l.p50_ms)) } td { (ms(l.p90_ms)) }
                    }
                }))
                p.notice { "Over the gateway's last 10 s." }
            } @else {
                p.notice { "This node routes no gateway (`[gateway] listen`): no load to show." }
            }
        }
    }
}

fn links(pairs: &[MatrixPair]) -> Markup {
    html! {
        h3 { "The plan's measured links" }
        (h::table(&["Provider", "Provider", "RTT p50", "RTT p90", "Throughput", "Age at the match"], html! {
            @for p in pairs {
                tr {
                    td { (h::short(&p.a)) } td { (h::short(&p.b)) }
                    td { (p.rtt_p50_us) " µs" } td { (p.rtt_p90_us) " µs" }
                    td { @match p.mbps { Some(v) => { (v) " Mbit/s" }, None => "—" } }
                    td { (p.age_s) " s" @if p.one_sided { " (one end)" } }
                }
            }
        }))
    }
}

fn chain_trail(a: &AuditJob) -> Markup {
    html! {
        section.chain {
            h2 { "On chain: " (h::state(&a.status)) " " small { (a.confirmations) " confirmations" } }
            dl {
                dt { "Spec" } dd.spec { (h::cid_link(&a.spec, false)) " " a.dl href=(h::download_href(&a.spec, Some("spec.json"))) download { "download" } }
                dt { "Orchestrator" } dd { (h::provider_link(&a.orchestrator)) }
                dt { "GPUs" } dd { (a.gpus) }
                dt { "Budget" } dd.budget { (amount(a.budget.get(), "NTX")) }
                dt { "Max rate" } dd { (amount(a.max_rate.get(), "NTX/GPU-h")) }
                dt { "Deadline" } dd { (h::time(a.deadline_ms)) }
                @if let Some(s) = a.started_at_ms { dt { "Started" } dd { (h::time(s)) } }
                dt { "Refund" } dd.refund { @match a.refund { Some(r) => (amount(r.get(), "NTX")), None => "—" } }
            }
            @if !a.assignments.is_empty() {
                h3 { "Assignments, claims and payments" }
                (h::table(&["Rank", "Provider", "GPUs", "Rate", "Result", "Log", "GPU-ms", "Exit", "Paid"], html! {
                    @for (i, s) in a.assignments.iter().enumerate() {
                        tr.assignment data-index=(i) {
                            td { (i) }
                            td { (h::provider_link(&s.provider)) }
                            td { (s.gpus) }
                            td { (amount(s.rate.get(), "NTX/GPU-h")) }
                            @match &s.attestation {
                                Some(t) => {
                                    td { (h::cid_short(&t.result, false, None)) }
                                    td { (h::cid_short(&t.logs, true, Some("log.txt"))) }
                                    td.gpu-ms { span data-v=(t.gpu_ms) { (h::grouped(t.gpu_ms)) } }
                                    td { (t.exit_code) }
                                },
                                None => { td { "—" } td { "—" } td { "—" } td { "—" } },
                            }
                            td.paid { @match s.paid { Some(p) => (amount(p.get(), "NTX")), None => "—" } }
                        }
                    }
                }))
            }
            h3 { "Transactions" }
            (h::table(&["Kind", "Transaction", "Block", "Slot", "Fee"], html! {
                @for t in &a.txs {
                    tr.tx data-kind=(t.kind) {
                        td { (t.kind) } td { (h::short(&t.tx_id)) } td { (t.block) } td { (t.slot) }
                        td { (amount(t.fee.get(), "lovelace")) }
                    }
                }
            }))
        }
    }
}

fn audit(r: &AuditReport) -> Markup {
    html! {
        section.audit data-pass=(r.pass) {
            h2 { "Audit: " @if r.pass { span.tag.ok { "every check passes" } } @else { span.tag.bad { "a check fails" } } }
            (h::table(&["Check", "Result", "Detail"], html! {
                @for c in &r.checks {
                    tr.check data-name=(c.name) data-pass=(c.pass) {
                        td { code { (c.name) } }
                        td { @if c.pass { span.tag.ok { "pass" } } @else { span.tag.bad { "FAIL" } } }
                        td { (c.detail) }
                    }
                }
            }))
        }
    }
}

/// `/jobs/{id}/logs`: each attested provider's log (`job_logs`).
pub async fn logs(source: &Source, id: &str) -> Markup {
    let logs = source.logs(id).await;
    let body = html! {
        h1 { "Logs of " (h::job_link(id)) }
        @match &logs {
            Ok(list) => {
                @for l in list {
                    section.log data-index=(l.index) {
                        h2 { "Rank " (l.index) " · " (h::provider_link(&l.provider)) }
                        p { (h::cid_short(&l.cid, true, Some("log.txt"))) " · " (l.bytes) " bytes" }
                        @if let Some(e) = &l.error { p.error { (e) } }
                        pre { (l.text) }
                    }
                }
            },
            Err(e) => (h::unavailable("The logs", e)),
        }
    };
    h::page("Logs", "/jobs", body)
}

/// `/jobs/{id}/outputs`: each attested provider's output tree (`job_outputs`), every file
/// with its CID and a download link.
pub async fn outputs(source: &Source, id: &str) -> Markup {
    let outputs = source.outputs(id).await;
    let body = html! {
        h1 { "Outputs of " (h::job_link(id)) }
        @match &outputs {
            Ok(list) => {
                @for o in list {
                    section.output data-index=(o.index) {
                        h2 { "Rank " (o.index) " · " (h::provider_link(&o.provider)) }
                        p { "Root " (h::cid_link(&o.cid, false)) }
                        @if let Some(e) = &o.error { p.error { (e) } }
                        (h::table(&["File", "Bytes", "CID"], html! {
                            @for f in &o.files {
                                tr { td { code { (f.path) } } td { (f.bytes) } td { (h::cid_short(&f.cid, true, f.path.rsplit('/').next())) } }
                            }
                        }))
                    }
                }
            },
            Err(e) => (h::unavailable("The outputs", e)),
        }
    };
    h::page("Outputs", "/jobs", body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ganglion_rpc::types::ServiceLoad;

    #[test]
    fn a_services_record_shows_its_replicas_load_and_cost() {
        let s = JobService {
            name: "abababababababab".into(),
            wanted: 3,
            running: vec![0, 2],
            load: Some(ServiceLoad {
                healthy: 2,
                in_flight: 5,
                requests_per_s: 41.25,
                p50_ms: Some(4.4),
                p90_ms: None,
            }),
            cost_so_far: 2_500_000.into(),
            requests: 1_250,
            cost_per_1k_requests: Some(2_000_000.into()),
        };
        let page = service(&s).into_string();
        for want in [
            "/abababababababab/",
            "2 of 3 replicas wanted running",
            "41.2",
            "4.4 ms",
            "data-wanted=\"3\"",
            "1250 requests answered",
            "per 1 000 requests",
        ] {
            assert!(page.contains(want), "{want} not in {page}");
        }
        let unrouted = service(&JobService {
            load: None,
            requests: 0,
            cost_per_1k_requests: None,
            ..s
        })
        .into_string();
        assert!(unrouted.contains("no load to show"), "{unrouted}");
        assert!(!unrouted.contains("requests answered"), "{unrouted}");
    }
}
