//! `/search?q=`: what the indexer knows about a job id (64 hex digits → its page), a
//! provider (56 hex digits or a libp2p peer id → `audit_provider`) or a CID (→ `audit_cid`:
//! the jobs whose lock or claims name it).

use maud::{Markup, html};

use super::super::html::{self as h, amount};
use super::super::source::Source;

/// What a query names, by its form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Query<'a> {
    /// Nothing asked yet.
    Empty,
    /// 64 hex digits.
    Job(&'a str),
    /// 56 hex digits, or a base58 libp2p peer id (`12D3KooW…`, `Qm…` is a CID).
    Provider(&'a str),
    /// A CID (CIDv0 `Qm…`, or multibase CIDv1).
    Cid(&'a str),
    /// None of these.
    Unknown(&'a str),
}

impl<'a> Query<'a> {
    /// Classifies `q` (trimmed).
    pub fn of(q: &'a str) -> Self {
        let q = q.trim();
        let hex = |n: usize| q.len() == n && q.bytes().all(|b| b.is_ascii_hexdigit());
        if q.is_empty() {
            Self::Empty
        } else if hex(64) {
            Self::Job(q)
        } else if hex(56) || q.parse::<libp2p::PeerId>().is_ok() && !q.starts_with("Qm") {
            Self::Provider(q)
        } else if cid::Cid::try_from(q).is_ok() {
            Self::Cid(q)
        } else {
            Self::Unknown(q)
        }
    }
}

/// The page.
pub async fn render(source: &Source, q: &str) -> Markup {
    let query = Query::of(q);
    let result = match query {
        Query::Empty => {
            html! { p { "A job id (64 hex digits), a provider's payment key hash (56 hex digits) or peer id, or a CID." } }
        }
        Query::Job(id) => match source.audit_job(id).await {
            Ok(a) => html! {
                p { "Job " (h::job_link(&a.job_id)) ": " (h::state(&a.status)) ", "
                    (a.gpus) " GPUs, budget " (amount(a.budget.get(), "NTX")) ", "
                    (a.assignments.len()) " providers." }
            },
            Err(e) => html! { p.notice { "No such job on chain: " (e.message) } },
        },
        Query::Provider(k) => match source.provider(k).await {
            Ok(p) => html! {
                section.provider data-provider=(p.provider) {
                    h2 { "Provider " (h::short(&p.provider)) }
                    dl {
                        dt { "Earned" } dd.earnings { (amount(p.earnings.get(), "NTX")) }
                        dt { "Slashed" } dd.slashed { (amount(p.slashed.get(), "NTX")) }
                        dt { "Defaults" } dd { (p.defaults.len()) }
                    }
                    h3 { "Bonds" }
                    @if p.bonds.is_empty() { p.notice { "No live bond: not a provider now." } }
                    @else {
                        (h::table(&["Bond", "GPUs", "Free", "Stake", "State"], html! {
                            @for b in &p.bonds {
                                tr.bond {
                                    td { (h::short(&b.bond)) } td { (b.gpus) } td { (b.free_gpus) }
                                    td { (amount(b.stake.get(), "NTX")) }
                                    td { @match b.unbonding_since_ms { Some(t) => { "unbonding since " (h::time(t)) }, None => "active" } }
                                }
                            }
                        }))
                    }
                    h3 { "Jobs" }
                    ul { @for j in &p.jobs { li { (h::job_link(j)) @if p.defaults.contains(j) { " " span.tag.bad { "defaulted" } } } } }
                }
            },
            Err(e) => html! { p.notice { "No such provider on chain: " (e.message) } },
        },
        Query::Cid(c) => match source.cid(c).await {
            Ok(uses) if uses.is_empty() => {
                html! { p.notice { "No lock or claim on chain names " code { (c) } "." } }
            }
            Ok(uses) => html! {
                // A result is a directory: its files download from the job's outputs page.
                p { "The chain's record names " (h::cid_link(c, uses.iter().all(|u| u.field != "result"))) ":" }
                (h::table(&["Job", "As", "Rank", "Provider", "Slot"], html! {
                    @for u in &uses {
                        tr.use data-field=(u.field) {
                            td { (h::job_link(&u.job_id)) } td { (u.field) }
                            td { @if let Some(i) = u.index { (i) } }
                            td { @if let Some(p) = &u.provider { (h::provider_link(p)) } }
                            td { (u.slot) }
                        }
                    }
                }))
            },
            Err(e) => h::unavailable("The CID lookup", &e),
        },
        Query::Unknown(q) => {
            html! { p.notice { code { (q) } " is not a job id, a provider key or peer id, or a CID." } }
        }
    };
    let body = html! {
        h1 { "Audit search" }
        form action="/search" method="get" {
            input.wide type="search" name="q" value=(q) aria-label="Query";
            " " button type="submit" { "Search" }
        }
        (result)
    };
    h::page("Audit search", "/search", body)
}

#[cfg(test)]
mod tests {
    use super::Query;

    #[test]
    fn queries_are_classified_by_their_form() {
        assert_eq!(Query::of("  "), Query::Empty);
        let job = "ab".repeat(32);
        assert_eq!(Query::of(&job), Query::Job(&job));
        let key = "cd".repeat(28);
        assert_eq!(Query::of(&key), Query::Provider(&key));
        let peer = "12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN";
        assert_eq!(Query::of(peer), Query::Provider(peer));
        let v0 = "QmbWqxBEKC3P8tqsKc98xmWNzrzDtRLMiMPL8wBuTGsMnR";
        assert_eq!(Query::of(v0), Query::Cid(v0));
        let v1 = "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi";
        assert_eq!(Query::of(v1), Query::Cid(v1));
        assert_eq!(Query::of("<b>"), Query::Unknown("<b>"));
    }
}
