//! The shared layout of every page and the small formatting rules: amounts in base units
//! with their raw value in `data-v` (what the browser tests compare with the RPC's JSON),
//! POSIX-ms times as UTC, shortened hex with the full value in `title`.

use maud::{DOCTYPE, Markup, PreEscaped, html};

/// The style sheet, served at [`CSS_PATH`].
pub const CSS: &str = include_str!("assets/console.css");
/// The live-update script, served at [`JS_PATH`].
pub const JS: &str = include_str!("assets/console.js");
/// Where the style sheet is served.
pub const CSS_PATH: &str = "/assets/console.css";
/// Where the script is served.
pub const JS_PATH: &str = "/assets/console.js";

/// The pages of the navigation bar: (path, label).
const NAV: [(&str, &str); 4] = [
    ("/jobs", "Jobs"),
    ("/market", "Market"),
    ("/provider", "Provider"),
    ("/search", "Audit search"),
];

/// A whole page: `title`, the navigation with `active` marked, then `body`.
pub fn page(title: &str, active: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Ganglion" }
                link rel="stylesheet" href=(CSS_PATH);
                script src=(JS_PATH) defer {}
            }
            body {
                header {
                    a.brand href="/jobs" { "Ganglion" }
                    nav {
                        @for (path, label) in NAV {
                            @if path == active {
                                a.active href=(path) aria-current="page" { (label) }
                            } @else {
                                a href=(path) { (label) }
                            }
                        }
                    }
                    form.search action="/search" method="get" role="search" {
                        input type="search" name="q" placeholder="job id, provider key, CID"
                            aria-label="Audit search";
                    }
                }
                main { (body) }
            }
        }
    }
}

/// An amount in base units (NTX or lovelace), digits grouped by thin spaces, the exact
/// value in `data-v`.
pub fn amount(v: u64, unit: &str) -> Markup {
    html! { span.amt data-v=(v) { (grouped(v)) " " small { (unit) } } }
}

/// `v` with its digits grouped in threes by thin spaces (U+2009).
pub fn grouped(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::with_capacity(digits.len() * 2);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('\u{2009}');
        }
        out.push(c);
    }
    out
}

/// POSIX ms as `YYYY-MM-DD HH:MM:SS.mmm UTC`, the raw value in `data-ms`.
pub fn time(ms: u64) -> Markup {
    html! { time data-ms=(ms) { (utc(ms)) } }
}

/// POSIX ms as `YYYY-MM-DD HH:MM:SS.mmm` (UTC).
pub fn utc(ms: u64) -> String {
    const FORMAT: &[time::format_description::FormatItem<'static>] = time::macros::format_description!(
        "[year]-[month]-[day] [hour]:[minute]:[second].[subsecond digits:3]"
    );
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(FORMAT).ok())
        .unwrap_or_else(|| format!("{ms} ms"))
}

/// `s` cut to its first `head` and last `tail` characters around an ellipsis when longer
/// than `head + tail + 4`.
fn abbreviate(s: &str, head: usize, tail: usize) -> String {
    if s.len() > head + tail + 4 && s.is_ascii() {
        format!("{}…{}", &s[..head], &s[s.len() - tail..])
    } else {
        s.to_string()
    }
}

/// A hex value shortened to its first and last 8 characters, the whole in `title` and
/// `data-full`.
pub fn short(hex: &str) -> Markup {
    html! { code title=(hex) data-full=(hex) { (abbreviate(hex, 8, 8)) } }
}

/// A job id linking to its page.
pub fn job_link(id: &str) -> Markup {
    html! { a href={ "/jobs/" (id) } { (short(id)) } }
}

/// A provider key linking to the audit search for it.
pub fn provider_link(key: &str) -> Markup {
    html! { a href={ "/search?q=" (key) } { (short(key)) } }
}

/// A CID (whole) linking to the audit search for it, with a download link when `download`.
pub fn cid_link(cid: &str, download: bool) -> Markup {
    cid_markup(cid, cid.to_string(), download, None)
}

/// A CID shortened to its first 12 and last 6 characters (tables stay narrow), the whole in
/// `title` and `data-full`, linking to the audit search; with a download link when
/// `download` (a file), named `filename` when given.
pub fn cid_short(cid: &str, download: bool, filename: Option<&str>) -> Markup {
    cid_markup(cid, abbreviate(cid, 12, 6), download, filename)
}

fn cid_markup(cid: &str, shown: String, download: bool, filename: Option<&str>) -> Markup {
    html! {
        @if cid.is_empty() {
            "—"
        } @else {
            a href={ "/search?q=" (cid) } { code.cid title=(cid) data-full=(cid) { (shown) } }
            @if download {
                " " a.dl href=(download_href(cid, filename)) download { "download" }
            }
        }
    }
}

/// `/ipfs/<cid>`, with `?filename=` (as IPFS gateways take it, form-encoded) when a name is
/// known.
pub fn download_href(cid: &str, filename: Option<&str>) -> String {
    match filename {
        Some(f) => format!(
            "/ipfs/{cid}?filename={}",
            form_urlencoded::byte_serialize(f.as_bytes()).collect::<String>()
        ),
        None => format!("/ipfs/{cid}"),
    }
}

/// A notice that a section could not be read, with why.
pub fn unavailable(what: &str, why: &impl std::fmt::Display) -> Markup {
    html! { p.notice role="status" { (what) " is not available: " (why.to_string()) } }
}

/// A state as a badge (`data-state` carries it for scripts and tests).
pub fn state(s: &str) -> Markup {
    html! { span.state data-state=(s) class={ "state s-" (s) } { (s) } }
}

/// A table wrapped so that it scrolls sideways on a narrow screen instead of widening the
/// page.
pub fn table(head: &[&str], rows: Markup) -> Markup {
    html! {
        div.scroll {
            table {
                thead { tr { @for h in head { th scope="col" { (h) } } } }
                tbody { (rows) }
            }
        }
    }
}

/// JSON for a `<script type="application/json">` block: `<` escaped so that no string can
/// close the element.
pub fn json_block(id: &str, value: &impl serde::Serialize) -> Markup {
    let text = serde_json::to_string(value)
        .unwrap_or_else(|_| "null".into())
        .replace('<', "\\u003c");
    html! { script type="application/json" id=(id) { (PreEscaped(text)) } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc_and_amounts_keep_their_exact_value() {
        assert_eq!(utc(0), "1970-01-01 00:00:00.000");
        assert_eq!(utc(951_782_400_123), "2000-02-29 00:00:00.123");
        assert_eq!(utc(1_796_256_000_000), "2026-12-03 00:00:00.000");
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_234_567), "1\u{2009}234\u{2009}567");
        let m = amount(u64::MAX, "NTX").into_string();
        assert!(m.contains(&format!("data-v=\"{}\"", u64::MAX)), "{m}");
    }

    #[test]
    fn text_from_the_chain_is_escaped() {
        let hostile = "<script>alert(1)</script>";
        let page = page("t", "/jobs", html! { (hostile) }).into_string();
        assert!(!page.contains(hostile), "{page}");
        assert!(page.contains("&lt;script&gt;"));
        let block = json_block("x", &serde_json::json!({ "s": "</script><b>" })).into_string();
        assert!(!block.contains("</script><b>"), "{block}");
    }
}
