//! `/jobs`: every job the node holds a record of, per role, newest change first, with its
//! state and, for the [`SHOWN`] most recent orchestrator records, its nodes and what it cost
//! so far (the NTX its providers' claims were paid: `job_status`'s `nodes[].paid`, which
//! `job_list` leaves out as it reads no chain).

use maud::{Markup, html};

use super::super::html::{self as h, amount};
use super::super::source::Source;
use ganglion_rpc::types::JobStatus;

/// Records listed at most (the most recently changed).
pub const SHOWN: usize = 200;

/// NTX base units paid to the record's nodes so far (the orchestrator's record).
pub fn paid(s: &JobStatus) -> u64 {
    s.nodes
        .iter()
        .filter_map(|n| n.paid.map(|p| p.get()))
        .fold(0, u64::saturating_add)
}

/// The page.
pub async fn render(source: &Source) -> Markup {
    let jobs = match source.jobs().await {
        Ok(list) => Ok(with_shares(source, list).await),
        Err(e) => Err(e),
    };
    let body = html! {
        h1 { "Jobs" }
        @match &jobs {
            Ok((list, _)) if list.is_empty() => p.notice { "This node holds no job yet: submit one with "
                code { "ganglion job submit spec.yaml" } "." },
            Ok((list, total)) => {
                @if *total > list.len() {
                    p.notice { "The " (list.len()) " most recently changed of " (total) " records." }
                }
                (h::table(&["Job", "Role", "State", "Nodes", "Paid", "Changed"], html! {
                    @for s in list {
                        tr.job data-job=(s.job_id) data-role=(s.role) {
                            td { (h::job_link(&s.job_id)) }
                            td { (s.role) }
                            td { (h::state(&s.state)) @if let Some(o) = &s.outcome { " " span.tag { (o) } } }
                            @if s.role == "orchestrator" {
                                td.nodes { (s.nodes.len()) }
                                td.paid { (amount(paid(s), "NTX")) }
                            } @else {
                                td { "—" } td { "—" }
                            }
                            td { @if let Some(t) = s.history.last() { (h::time(t.at_ms)) } }
                        }
                    }
                }))
            },
            Err(e) => (h::unavailable("The job list", e)),
        }
    };
    h::page("Jobs", "/jobs", body)
}

/// The first [`SHOWN`] records, each orchestrator record replaced by its `job_status` one
/// (with its nodes' shares from the chain); and how many records there are.
async fn with_shares(source: &Source, list: Vec<JobStatus>) -> (Vec<JobStatus>, usize) {
    let total = list.len();
    let shown: Vec<JobStatus> = list.into_iter().take(SHOWN).collect();
    let full = futures::future::join_all(shown.iter().map(|s| async move {
        if s.role != "orchestrator" {
            return None;
        }
        let records = source.job(&s.job_id).await.ok()?;
        records.into_iter().find(|r| r.role == "orchestrator")
    }))
    .await;
    let out = shown
        .into_iter()
        .zip(full)
        .map(|(s, f)| f.unwrap_or(s))
        .collect();
    (out, total)
}
