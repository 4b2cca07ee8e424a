//! `gpus.min_vram_gib` is the card's marketed class (field case `vram/`): every row of
//! `shared/fixtures/field/vram/reported-vram.csv` against the matcher.

use std::path::PathBuf;

use ganglion_market::spec::{Interconnect, Vendor};
use ganglion_market::vram;
use ganglion_market::{GpuModel, MarketSnapshot, SnapshotOptions, match_gang};

use ganglion_market::test_utils::{offer, req};

/// One CSV row: model, marketed class (GB), reported MiB (rounded down) and exact bytes.
struct Row {
    model: String,
    marketed_gb: u32,
    reported_mib: u64,
    reported_bytes: u64,
}

fn rows() -> Vec<Row> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/field/vram/reported-vram.csv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("column {name} in {header:?}"))
    };
    let (model, marketed, total, bytes) = (
        col("model"),
        col("marketed"),
        col("reported_total"),
        col("reported_bytes"),
    );
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let reported_bytes: u64 = f[bytes].parse().expect("reported_bytes");
            let reported_mib = match f[total].strip_suffix(" MiB") {
                Some(mib) => mib.parse().expect("reported MiB"),
                None => reported_bytes / vram::MIB,
            };
            Row {
                model: f[model].to_string(),
                marketed_gb: f[marketed]
                    .strip_suffix(" GB")
                    .and_then(|g| g.parse().ok())
                    .expect("marketed `N GB`"),
                reported_mib,
                reported_bytes,
            }
        })
        .collect()
}

fn model_of(row: &Row, exact_bytes: bool) -> GpuModel {
    GpuModel {
        vendor: Vendor::Nvidia,
        name: row.model.clone(),
        vram_mib: row.reported_mib,
        vram_bytes: exact_bytes.then_some(row.reported_bytes),
        interconnect: Interconnect::Any,
        ..GpuModel::default()
    }
}

/// Whether the matcher places one GPU of `model` for `min_vram_gib: class`.
fn matches(model: GpuModel, class: u32) -> bool {
    let m = MarketSnapshot::build(&[offer(1, model, 1, 10)], &[], SnapshotOptions::default())
        .expect("one provider");
    let mut r = req(1);
    r.min_vram_gib = class;
    match_gang(&r, &m).is_ok()
}

fn row<'a>(rows: &'a [Row], model: &str) -> &'a Row {
    rows.iter()
        .find(|r| r.model == model)
        .unwrap_or_else(|| panic!("{model} in the CSV"))
}

#[test]
fn every_card_meets_its_marketed_class_and_not_the_next() {
    let rows = rows();
    assert_eq!(rows.len(), 9, "the nine cards of the fixture");
    let mut classes: Vec<u32> = rows.iter().map(|r| r.marketed_gb).collect();
    classes.sort_unstable();
    classes.dedup();
    for r in &rows {
        // Exact bytes, and MiB alone (what older offers carry), give the same answers.
        for exact in [true, false] {
            assert!(
                matches(model_of(r, exact), r.marketed_gb),
                "{} ({} MiB) must satisfy min_vram_gib {}",
                r.model,
                r.reported_mib,
                r.marketed_gb
            );
            if let Some(&next) = classes.iter().find(|&&c| c > r.marketed_gb) {
                assert!(
                    !matches(model_of(r, exact), next),
                    "{} must not satisfy min_vram_gib {next}",
                    r.model
                );
            }
        }
        assert!(
            vram::is_class(r.reported_bytes, r.marketed_gb),
            "{} is of the {} GB class",
            r.model,
            r.marketed_gb
        );
        // The naive comparison this replaces: it refuses every card but the A100s.
        let naive = r.reported_mib >= u64::from(r.marketed_gb) * 1024;
        assert_eq!(naive, r.model.contains("A100"), "{}", r.model);
    }
}

#[test]
fn the_readme_answers() {
    let rows = rows();
    let cases = [
        ("NVIDIA H100 80GB HBM3 (SXM5)", 80, true),
        ("NVIDIA H100 80GB HBM3 (SXM5)", 90, false),
        ("NVIDIA A100 80GB", 80, true),
        ("NVIDIA L40S", 48, true),
        ("NVIDIA L40S", 80, false),
        ("NVIDIA GeForce RTX 4090", 24, true),
        ("NVIDIA L4", 24, true),
        ("NVIDIA A10", 24, true),
        ("NVIDIA T4", 16, true),
        ("NVIDIA T4", 24, false),
        ("NVIDIA A100 40GB", 48, false),
        ("NVIDIA H100 NVL", 94, true),
        ("NVIDIA H100 NVL", 90, true),
    ];
    for (model, class, want) in cases {
        let r = row(&rows, model);
        assert_eq!(
            matches(model_of(r, true), class),
            want,
            "{model} for min_vram_gib {class}"
        );
    }
    // The fit check keeps the exact bytes: 99 961 274 368 B is not a whole number of MiB.
    let nvl = model_of(row(&rows, "NVIDIA H100 NVL"), true);
    assert_eq!(nvl.vram_total_bytes(), 99_961_274_368);
    assert_eq!(nvl.vram_mib, 95_330, "MiB rounded down");
    assert!(nvl.vram_mib * vram::MIB < nvl.vram_total_bytes());
}
