//! `/market`: the live offers and the latency matrix the matcher would use now, as a heat
//! map (green at 0 ms to red at [`HOT_MS`] and above; grey: no fresh measurement, so the
//! pair is never placed together under `placement.max_rtt_ms`).

use maud::{Markup, html};

use super::super::html::{self as h, amount};
use super::super::source::Source;
use ganglion_rpc::audit::{MarketMatrix, MarketOffer};

/// RTT at and above which a heat-map cell is fully red, ms.
pub const HOT_MS: f64 = 100.0;

/// The page.
pub async fn render(source: &Source) -> Markup {
    let (offers, matrix) = tokio::join!(source.offers(), source.matrix());
    let body = html! {
        h1 { "Market" }
        section {
            h2 { "Live offers" }
            @match &offers {
                Ok(o) if o.is_empty() => p.notice { "No live offers: no provider has gossiped one yet." },
                Ok(o) => (offers_table(o)),
                Err(e) => (h::unavailable("Offers", e)),
            }
        }
        section {
            h2 { "Latency matrix" }
            @match (&offers, &matrix) {
                (Ok(o), Ok(m)) => (heat_map(o, m)),
                (_, Err(e)) | (Err(e), _) => (h::unavailable("The matrix", e)),
            }
        }
    };
    h::page("Market", "/market", body)
}

fn offers_table(offers: &[MarketOffer]) -> Markup {
    let rows = html! {
        @for o in offers {
            tr.offer data-provider=(o.provider) {
                td { (h::provider_link(&o.provider)) }
                td {
                    @for g in &o.gpus {
                        div {
                            (g.model) " · " (format!("{:.1}", g.vram_mib as f64 / 1024.0)) " GiB · "
                            span.free data-v=(g.free) { (g.free) " free" }
                            @if g.declared { " · " span.tag { "declared" } }
                            @else { " · " span.tag.ok { "detected" } }
                        }
                    }
                }
                td { span.bondgpus data-v=(o.bond_gpus) { (o.bond_gpus) } " GPUs" }
                td { (amount(o.price_per_gpu_hour.get(), "NTX/GPU-h")) }
                td {
                    (o.score) " "
                    @match o.bench_version {
                        Some(v) => span.tag.ok { "measured (bench v" (v) ")" },
                        None => span.tag { "unmeasured" },
                    }
                }
                td {
                    @if o.direct_capable { span.tag.ok { "direct" } } @else { span.tag { "relayed" } }
                }
                td { (h::short(&o.bond)) }
            }
        }
    };
    h::table(
        &[
            "Provider",
            "GPUs",
            "Bond backs",
            "Price",
            "Score",
            "Reach",
            "Bond",
        ],
        rows,
    )
}

/// Green (0 ms) to red ([`HOT_MS`]) as an HSL hue: 120 → 0.
fn heat(rtt_us: u32) -> String {
    let ms = f64::from(rtt_us) / 1000.0;
    let hue = 120.0 * (1.0 - (ms / HOT_MS).min(1.0));
    format!("background:hsl({hue:.0},70%,80%)")
}

fn heat_map(offers: &[MarketOffer], m: &MarketMatrix) -> Markup {
    let mut keys: Vec<&str> = offers.iter().map(|o| o.provider.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    let cell = |a: &str, b: &str| {
        m.pairs
            .iter()
            .find(|p| (p.a == a && p.b == b) || (p.a == b && p.b == a))
    };
    html! {
        @if keys.len() < 2 {
            p.notice { "A matrix needs two providers' offers." }
        } @else {
            div.scroll {
                table.heat {
                    thead { tr { th {} @for k in &keys { th scope="col" { (h::short(k)) } } } }
                    tbody {
                        @for a in &keys {
                            tr {
                                th scope="row" { (h::short(a)) }
                                @for b in &keys {
                                    @if a == b {
                                        td.self { "·" }
                                    } @else {
                                        @match cell(a, b) {
                                            Some(p) => td.pair style=(heat(p.rtt_p50_us))
                                                data-rtt-us=(p.rtt_p50_us)
                                                title={ "p50 " (p.rtt_p50_us) " µs, p90 " (p.rtt_p90_us)
                                                    " µs, " (p.mbps.map_or("throughput not measured".to_string(), |v| format!("{v} Mbit/s")))
                                                    ", measured " (p.age_s) " s ago"
                                                    @if p.one_sided { ", one end only" } } {
                                                (format!("{:.1}", f64::from(p.rtt_p50_us) / 1000.0)) " ms"
                                                @if let Some(v) = p.mbps { br; small { (v) " Mbit/s" } }
                                            },
                                            None => td.none title="no fresh measurement: never placed together under max_rtt_ms" { "—" },
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            p.legend { "Median RTT between providers (green 0 ms → red ≥ " (HOT_MS) " ms); measurements older than "
                (m.max_age_s) " s are dropped." }
        }
    }
}
