//! `/provider`: this node as a provider — its bonds (`provider_bond`), the capacity its
//! assignments commit, its running shares (`job_list`), and its earnings and slashes over
//! time (`audit_provider`, each job's claim from `audit_job`) as a chart of cumulative NTX
//! by slot.

use maud::{Markup, html};

use ganglion_rpc::audit::{AuditJob, AuditProvider};

use super::super::html::{self as h, amount};
use super::super::source::Source;
use super::job::is_terminal;

/// Jobs whose claims the chart reads at most (the most recent ones).
pub const CHART_JOBS: usize = 200;

/// One point of the chart: slot, cumulative NTX earned, and whether a slash happened there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    /// Slot of the claim (or the expire that slashed).
    pub slot: u64,
    /// NTX base units earned up to and including this point.
    pub earned: u64,
    /// A default of this provider was slashed here.
    pub slash: bool,
}

/// The chart's points from `jobs` (as `audit_job` gives them) for provider `me`.
pub fn points(me: &str, jobs: &[AuditJob]) -> Vec<Point> {
    let mut events: Vec<(u64, u64, bool)> = Vec::new();
    // The line starts at the first job's lock, at zero.
    if let Some(first) = jobs
        .iter()
        .filter_map(|j| j.txs.iter().find(|t| t.kind == "lock"))
        .map(|t| t.slot)
        .min()
    {
        events.push((first, 0, false));
    }
    for j in jobs {
        let mine: Vec<_> = j.assignments.iter().filter(|a| a.provider == me).collect();
        let claims: Vec<_> = j.txs.iter().filter(|t| t.kind == "claim").collect();
        let paid: u64 = mine.iter().filter_map(|a| a.paid.map(|p| p.get())).sum();
        // The claim transactions of a job are in chain order; this provider's pay lands in
        // the last claim slot that could be its own (a job has one claim per assignment).
        if paid > 0
            && let Some(t) = claims.last()
        {
            events.push((t.slot, paid, false));
        }
        let defaulted = j.status == "expired" && mine.iter().any(|a| a.attestation.is_none());
        if defaulted && let Some(t) = j.txs.iter().find(|t| t.kind == "expire") {
            events.push((t.slot, 0, true));
        }
    }
    events.sort_unstable();
    let mut earned = 0u64;
    events
        .into_iter()
        .map(|(slot, paid, slash)| {
            earned = earned.saturating_add(paid);
            Point {
                slot,
                earned,
                slash,
            }
        })
        .collect()
}

/// An inline SVG step chart of `points` (no script needed).
pub fn chart(points: &[Point]) -> Markup {
    const W: f64 = 600.0;
    const H: f64 = 160.0;
    if points.is_empty() {
        return html! { p.notice { "No earnings or slashes yet." } };
    }
    let s0 = points[0].slot;
    let last = points[points.len() - 1].slot;
    // A tenth of the span (at least a slot) past the last point, so that it is seen.
    let s1 = last + ((last - s0) / 10).max(1);
    let top = points.iter().map(|p| p.earned).max().unwrap_or(1).max(1);
    let x = |s: u64| (s - s0) as f64 / (s1 - s0) as f64 * (W - 20.0) + 10.0;
    let y = |v: u64| H - 10.0 - v as f64 / top as f64 * (H - 20.0);
    let mut d = format!("M{:.1},{:.1}", x(s0), y(0));
    for p in points {
        d.push_str(&format!(" H{:.1} V{:.1}", x(p.slot), y(p.earned)));
    }
    d.push_str(&format!(" H{:.1}", x(s1)));
    html! {
        figure.chart {
            svg viewBox={ "0 0 " (W) " " (H) } role="img" aria-label="Cumulative NTX earned by slot" {
                path d=(d) fill="none" stroke="#2a6" stroke-width="2" {}
                @for p in points.iter().filter(|p| p.slash) {
                    circle cx=(format!("{:.1}", x(p.slot))) cy=(format!("{:.1}", y(p.earned))) r="5" fill="#c33" {
                        title { "slashed at slot " (p.slot) }
                    }
                }
            }
            figcaption { "Cumulative NTX earned, slot " (s0) " to " (s1) "; red dots: defaults slashed. Total "
                (amount(points[points.len() - 1].earned, "NTX")) }
        }
    }
}

/// The page.
pub async fn render(source: &Source) -> Markup {
    let (bonds, jobs) = tokio::join!(source.own_bonds(), source.jobs());
    let me = bonds
        .as_ref()
        .ok()
        .and_then(|b| b.first())
        .map(|b| b.provider.clone());
    let summary = match &me {
        Some(k) => Some(source.provider(k).await),
        None => None,
    };
    let history = match &summary {
        Some(Ok(s)) => Some(job_views(source, s).await),
        _ => None,
    };
    let body = html! {
        h1 { "Provider" }
        section {
            h2 { "Bonds" }
            @match &bonds {
                Ok(b) if b.is_empty() => p.notice { "This node has no bond: it offers no GPUs. A provider posts one at start ("
                    code { "[bond] stake_ntx" } ") or with " code { "ganglion provider bond post" } "." },
                Ok(b) => {
                    (h::table(&["Bond", "GPUs", "Committed", "Free", "Stake", "State"], html! {
                        @for x in b {
                            tr.bond {
                                td { (h::short(&x.bond)) }
                                td.gpus data-v=(x.gpus) { (x.gpus) }
                                td.committed data-v=(x.gpus.saturating_sub(x.free_gpus)) { (x.gpus.saturating_sub(x.free_gpus)) }
                                td.free data-v=(x.free_gpus) { (x.free_gpus) }
                                td { (amount(x.stake.get(), "NTX")) }
                                td { @match x.unbonding_since_ms { Some(t) => { "unbonding since " (h::time(t)) }, None => "active" } }
                            }
                        }
                    }))
                },
                Err(e) => (h::unavailable("The bonds", e)),
            }
        }
        section {
            h2 { "Running shares" }
            @match &jobs {
                Ok(list) => {
                    @let running: Vec<_> = list.iter().filter(|r| r.role == "provider" && !is_terminal(&r.role, &r.state)).collect();
                    @if running.is_empty() { p.notice { "No share running." } }
                    @else {
                        (h::table(&["Job", "State", "Since"], html! {
                            @for r in running {
                                tr { td { (h::job_link(&r.job_id)) } td { (h::state(&r.state)) }
                                     td { @if let Some(t) = r.history.last() { (h::time(t.at_ms)) } } }
                            }
                        }))
                    }
                },
                Err(e) => (h::unavailable("The job list", e)),
            }
        }
        section {
            h2 { "Earnings and slashes" }
            @match (&summary, &me) {
                (Some(Ok(s)), Some(k)) => {
                    dl {
                        dt { "Earned" } dd.earnings { (amount(s.earnings.get(), "NTX")) }
                        dt { "Slashed" } dd.slashed { (amount(s.slashed.get(), "NTX")) }
                        dt { "Jobs" } dd { (s.jobs.len()) }
                        dt { "Defaults" } dd { (s.defaults.len()) }
                    }
                    @if let Some(views) = &history { (chart(&points(k, views))) }
                },
                (Some(Err(e)), _) => (h::unavailable("The provider's record", e)),
                _ => p.notice { "Nothing earned: this node has no bond." },
            }
        }
    };
    h::page("Provider", "/provider", body)
}

async fn job_views(source: &Source, s: &AuditProvider) -> Vec<AuditJob> {
    let recent = s.jobs.iter().rev().take(CHART_JOBS);
    futures::future::join_all(recent.map(|id| source.audit_job(id)))
        .await
        .into_iter()
        .filter_map(Result::ok)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(me_paid: Option<u64>, status: &str, txs: &[(&str, u64)]) -> AuditJob {
        serde_json::from_value(serde_json::json!({
            "job_id": "00".repeat(32), "status": status, "orchestrator": "aa", "spec": "",
            "gpus": 1, "max_rate": "1", "budget": "10", "deadline_ms": 0, "started_at_ms": null,
            "assignments": [{ "provider": "me", "attest_key": "", "gpus": 1, "rate": "1",
                "attestation": me_paid.map(|_| serde_json::json!({"result": "", "logs": "",
                    "gpu_ms": 1, "exit_code": 0})),
                "paid": me_paid.map(|p| p.to_string()) }],
            "refund": null, "confirmations": 0,
            "txs": txs.iter().map(|(k, s)| serde_json::json!({"kind": k, "tx_id": "", "slot": s}))
                .collect::<Vec<_>>(),
        }))
        .expect("an AuditJob")
    }

    #[test]
    fn earnings_accumulate_by_claim_slot_and_defaults_are_marked() {
        let jobs = [
            job(
                Some(500),
                "claimed",
                &[("lock", 10), ("assign", 11), ("claim", 20)],
            ),
            job(
                None,
                "expired",
                &[("lock", 5), ("assign", 6), ("expire", 40)],
            ),
            job(Some(250), "claimed", &[("lock", 30), ("claim", 35)]),
        ];
        let p = points("me", &jobs);
        let got: Vec<_> = p.iter().map(|p| (p.slot, p.earned, p.slash)).collect();
        assert_eq!(
            got,
            [
                (5, 0, false),
                (20, 500, false),
                (35, 750, false),
                (40, 750, true)
            ]
        );
        assert!(
            points("someone else", &jobs)
                .iter()
                .all(|p| p.earned == 0 && !p.slash)
        );
        let svg = chart(&p).into_string();
        assert!(svg.contains("<path") && svg.contains("<circle"), "{svg}");
        assert!(svg.contains("data-v=\"750\""), "{svg}");
    }
}
