//! `/jobs`: every job the node holds a record of, per role, newest change first, with its
//! state and what it cost so far (the NTX its providers' claims were paid, as `job_status`'s
//! `nodes[].paid` says).

use maud::{Markup, html};

use super::super::html::{self as h, amount};
use super::super::source::Source;
use ganglion_rpc::types::JobStatus;

/// NTX base units paid to the record's nodes so far (the orchestrator's record).
pub fn paid(s: &JobStatus) -> u64 {
    s.nodes
        .iter()
        .filter_map(|n| n.paid.map(|p| p.get()))
        .fold(0, u64::saturating_add)
}

/// The page.
pub async fn render(source: &Source) -> Markup {
    let jobs = source.jobs().await;
    let body = html! {
        h1 { "Jobs" }
        @match &jobs {
            Ok(list) if list.is_empty() => p.notice { "This node holds no job yet: submit one with "
                code { "ganglion job submit spec.yaml" } "." },
            Ok(list) => (h::table(&["Job", "Role", "State", "Nodes", "Paid", "Changed"], html! {
                @for s in list {
                    tr.job data-job=(s.job_id) data-role=(s.role) {
                        td { (h::job_link(&s.job_id)) }
                        td { (s.role) }
                        td { (h::state(&s.state)) @if let Some(o) = &s.outcome { " " span.tag { (o) } } }
                        td { (s.nodes.len()) }
                        td { (amount(paid(s), "NTX")) }
                        td { @if let Some(t) = s.history.last() { (h::time(t.at_ms)) } }
                    }
                }
            })),
            Err(e) => (h::unavailable("The job list", e)),
        }
    };
    h::page("Jobs", "/jobs", body)
}
