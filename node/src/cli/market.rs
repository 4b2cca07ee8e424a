//! `ganglion market`: the live, verified offers a running node sees (`market_offers`) and the
//! provider-to-provider latency matrix its matcher would use (`market_matrix`).

use ganglion_rpc::audit::{MarketMatrix, MarketOffer, MatrixPair};
use serde::Serialize;

use super::remote::{RemoteArgs, call, print_json, print_stdout};
use ganglion_rpc::api::MarketApiClient;

/// The live market as the node sees it: each verified offer (free GPUs, price, score —
/// measured by its benchmark or unmeasured —, uplink, reachability, bond), then the
/// provider-to-provider latency matrix its matcher would use for `placement.max_rtt_ms` and
/// `placement.min_bandwidth_mbps` (each measured pair's RTT p50/p90, throughput and age) and
/// this node's own round trips. `--json` gives both as `{offers, matrix}`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// What `ganglion market --json` prints.
#[derive(Debug, Serialize)]
struct MarketJson<'a> {
    /// The live offers (`market_offers`).
    offers: &'a [MarketOffer],
    /// The matrix (`market_matrix`); `null` from a node that does not answer it.
    matrix: Option<&'a MarketMatrix>,
}

/// Prints offers one per line (text) or as JSON.
pub(crate) fn print_offers(offers: &[MarketOffer], json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(&offers);
    }
    print_stdout(&offers_text(offers))
}

/// Where a score comes from: `measured (bench vN)` (the onboarding benchmark of that
/// version) or `unmeasured` (declared GPUs, no GPU, a devnet: a neutral score).
pub(crate) fn compute_text(bench_version: Option<u32>) -> String {
    bench_version.map_or_else(
        || "unmeasured".to_string(),
        |v| format!("measured (bench v{v})"),
    )
}

/// Offers as text, one line each (a line saying so when there are none).
fn offers_text(offers: &[MarketOffer]) -> String {
    if offers.is_empty() {
        return "no live offers\n".into();
    }
    offers.iter().map(|o| offer_line(o) + "\n").collect()
}

/// One offer: `<provider> 2 free GPUs (A100) at 1 NTX/GPU-h, score 812 measured (bench v1),
/// uplink 940 Mbit/s, direct, bond <tx>#0 (8 GPUs), peer 12D3…`.
fn offer_line(o: &MarketOffer) -> String {
    let free: u32 = o.gpus.iter().map(|g| g.free).sum();
    let models: Vec<_> = o.gpus.iter().map(|g| g.model.as_str()).collect();
    format!(
        "{} {} free GPUs ({}) at {}/GPU-h, score {} {}, uplink {} Mbit/s, {}, bond {} ({} GPUs), \
         peer {}",
        o.provider,
        free,
        models.join(", "),
        ganglion_rpc::amount::ntx_text(o.price_per_gpu_hour.get()),
        o.score,
        compute_text(o.bench_version),
        o.uplink_mbps,
        if o.direct_capable {
            "direct"
        } else {
            "relay-only"
        },
        o.bond,
        o.bond_gpus,
        o.peer_id
    )
}

/// A round trip in µs as ms text, e.g. `0.42 ms`.
fn ms(us: u32) -> String {
    format!("{:.2} ms", f64::from(us) / 1000.0)
}

/// The first 12 hex digits of a key hash, then `…`.
fn short(key: &str) -> String {
    format!("{}…", key.get(..12).unwrap_or(key))
}

/// One pair as a line: `a… ↔ b…: p50 0.42 ms, p90 0.61 ms, 940 Mbit/s, 12 s old[, one-sided]`.
pub(crate) fn pair_line(p: &MatrixPair) -> String {
    let mut line = format!(
        "{} ↔ {}: p50 {}, p90 {}",
        short(&p.a),
        short(&p.b),
        ms(p.rtt_p50_us),
        ms(p.rtt_p90_us)
    );
    if let Some(mbps) = p.mbps {
        line.push_str(&format!(", {mbps} Mbit/s"));
    }
    line.push_str(&format!(", {} s old", p.age_s));
    if p.one_sided {
        line.push_str(", one-sided");
    }
    line
}

/// The matrix section of the text output.
fn matrix_text(m: &MarketMatrix) -> String {
    let mut out = format!(
        "latency matrix ({} measured pairs; measurements older than {} s are dropped, an \
         unmeasured pair is outside any placement.max_rtt_ms):",
        m.pairs.len(),
        m.max_age_s
    );
    for p in &m.pairs {
        out.push_str(&format!("\n  {}", pair_line(p)));
    }
    if !m.own.is_empty() {
        out.push_str("\nthis node's round trips:");
        for o in &m.own {
            out.push_str(&format!(
                "\n  → {}: latest {}, p50 {}, p90 {} ({} samples, {} s old)",
                short(&o.provider),
                ms(o.rtt_latest_us),
                ms(o.rtt_p50_us),
                ms(o.rtt_p90_us),
                o.samples,
                o.age_s
            ));
        }
    }
    out
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let (offers, matrix) = call(args.remote.config.as_deref(), |rpc| async move {
        let offers: Vec<MarketOffer> = MarketApiClient::offers(&rpc).await?;
        // An older node has no `market_matrix`: the offers still show.
        let matrix = MarketApiClient::matrix(&rpc).await.ok();
        Ok::<_, ganglion_rpc::jsonrpsee::core::client::Error>((offers, matrix))
    })?;
    if args.remote.json {
        return print_json(&MarketJson {
            offers: &offers,
            matrix: matrix.as_ref(),
        });
    }
    let matrix = match &matrix {
        Some(m) => matrix_text(m),
        None => "latency matrix: not available from this node".into(),
    };
    print_stdout(&format!("{}{matrix}\n", offers_text(&offers)))
}

#[cfg(test)]
mod tests {
    use ganglion_rpc::audit::{OfferGpus, OwnRtt};

    use super::*;

    fn offer(bench_version: Option<u32>) -> MarketOffer {
        MarketOffer {
            provider: "ab".repeat(28),
            peer_id: "12D3KooW".into(),
            bond: format!("{}#0", "cd".repeat(32)),
            bond_gpus: 8,
            price_per_gpu_hour: 1_000_000.into(),
            score: 812,
            bench_version,
            uplink_mbps: 940,
            direct_capable: true,
            gpus: vec![OfferGpus {
                model: "NVIDIA A100".into(),
                vram_mib: 81_920,
                free: 2,
                declared: false,
            }],
            addrs: vec![],
            expires_ms: 1,
        }
    }

    /// `ganglion market --help` says it prints the latency matrix too.
    #[test]
    fn the_help_mentions_the_latency_matrix() {
        let mut cli = <crate::Cli as clap::CommandFactory>::command();
        let market = cli
            .find_subcommand_mut("market")
            .expect("the market subcommand");
        let help = market.render_help().to_string();
        assert!(help.contains("latency matrix"), "{help}");
    }

    /// Each offer line says whether its score was measured, by which benchmark version, and
    /// the uplink the offer advertises.
    #[test]
    fn an_offer_line_says_measured_or_unmeasured_and_the_uplink() {
        let text = offers_text(&[offer(Some(3)), offer(None)]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].contains("score 812 measured (bench v3), uplink 940 Mbit/s, direct"),
            "{text}"
        );
        assert!(
            lines[1].contains("score 812 unmeasured, uplink 940 Mbit/s"),
            "{text}"
        );
        assert_eq!(offers_text(&[]), "no live offers\n");
        let json = serde_json::to_value(offer(None)).expect("json");
        assert_eq!(
            (&json["bench_version"], &json["uplink_mbps"]),
            (&serde_json::Value::Null, &serde_json::json!(940))
        );
    }

    #[test]
    fn the_matrix_section_names_each_pair_and_the_own_row() {
        let m = MarketMatrix {
            pairs: vec![MatrixPair {
                a: "a1".repeat(28),
                b: "b2".repeat(28),
                rtt_p50_us: 420,
                rtt_p90_us: 1_610,
                mbps: Some(940),
                measured_ms: 1,
                age_s: 12,
                one_sided: true,
            }],
            own: vec![OwnRtt {
                provider: "b2".repeat(28),
                peer_id: "12D3KooW".into(),
                rtt_latest_us: 300,
                rtt_p50_us: 310,
                rtt_p90_us: 900,
                samples: 16,
                age_s: 1,
            }],
            max_age_s: 300,
        };
        let text = matrix_text(&m);
        assert!(text.contains("1 measured pairs"), "{text}");
        assert!(
            text.contains(
                "a1a1a1a1a1a1… ↔ b2b2b2b2b2b2…: p50 0.42 ms, p90 1.61 ms, 940 Mbit/s, 12 s old, \
                 one-sided"
            ),
            "{text}"
        );
        assert!(
            text.contains("→ b2b2b2b2b2b2…: latest 0.30 ms, p50 0.31 ms, p90 0.90 ms (16 samples"),
            "{text}"
        );
        let json = serde_json::to_value(MarketJson {
            offers: &[],
            matrix: Some(&m),
        })
        .expect("json");
        assert_eq!(json["matrix"]["pairs"][0]["rtt_p90_us"], 1_610);
        assert_eq!(json["offers"], serde_json::json!([]));
    }
}
