//! Every file in `examples/ensembles/` parses; every file in `examples/ensembles/invalid/`
//! fails with the error its first line (`# expect: …`) names.

use std::path::PathBuf;

use ganglion_market::spec::{Rule, SpecError};
use ganglion_market::{Ensemble, Requirements};

/// 2026-01-01T00:00:00Z, POSIX ms: "now" for validation, fixed so the tests do not age.
const NOW_MS: u64 = 1_767_225_600_000;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/ensembles")
}

fn files(dir: PathBuf) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/ensembles exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

#[test]
fn every_example_parses_and_maps_to_escrow() {
    let files = files(dir());
    assert!(
        files.len() >= 5,
        "expected the 1/4/8/16-GPU examples, got {files:?}"
    );
    let mut counts = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("readable");
        let spec =
            Ensemble::parse(&text, NOW_MS).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let terms = spec.escrow_terms();
        // A service's escrow covers its most replicas at once; `gpus` is per replica.
        let replicas = spec.replicas.map_or(1, |r| u64::from(r.max));
        assert_eq!(terms.gpus, u64::from(spec.gpus.count) * replicas);
        assert_eq!(terms.budget, spec.budget_ntx);
        let datum = spec.escrow_datum(
            ganglion_contracts::v2::datum::JobId([7; 32]),
            [1; 28],
            [2; 32],
            vec![1, 85, 0],
            30_000,
        );
        assert_eq!(datum.max_rate, spec.limits.max_rate_ntx_per_gpu_hour);
        assert_eq!(datum.deadline_ms, spec.deadline_ms);
        assert_eq!(datum.receipt_interval_ms, 30_000);
        let req = Requirements::from_ensemble(&spec);
        assert_eq!(req.min_vram_gib, spec.gpus.min_vram_gib);
        counts.push(spec.gpus.count);
    }
    counts.sort_unstable();
    for needed in [1, 4, 8, 16] {
        assert!(
            counts.contains(&needed),
            "no {needed}-GPU example: {counts:?}"
        );
    }
}

#[test]
fn every_invalid_example_fails_naming_its_field() {
    let files = files(dir().join("invalid"));
    assert!(files.len() >= 10);
    for path in files {
        let text = std::fs::read_to_string(&path).expect("readable");
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{}: first line must be `# expect: …`", path.display()));
        let err = Ensemble::parse(&text, NOW_MS)
            .err()
            .unwrap_or_else(|| panic!("{} parsed but should fail", path.display()));
        let shown = err.to_string();
        assert!(
            err.field() == expect || shown.contains(expect),
            "{}: expected `{expect}`, got field `{}`: {shown}",
            path.display(),
            err.field()
        );
        let twice = format!("{0}: {0}:", err.field());
        assert!(
            !shown.contains(&twice),
            "{}: the field is named twice: {shown}",
            path.display()
        );
    }
}

/// An error and its sources, a line each, as `anyhow` prints the chain (`Caused by:`).
fn chain(err: &SpecError) -> String {
    let errors = std::iter::successors(Some(err as &dyn std::error::Error), |e| e.source());
    errors.map(|e| e.to_string()).collect::<Vec<_>>().join("\n")
}

/// A type error deep in the document names its dotted path once, in YAML and in JSON, and so
/// does its error chain, as `docs/ensemble-spec.md` shows (the YAML parser's own message
/// already starts with the path).
#[test]
fn a_type_error_names_its_field_once() {
    let yaml = base().replace("limits:", "placement:\n  max_rtt_ms: \"abc\"\nlimits:");
    let err = Ensemble::parse(&yaml, NOW_MS).expect_err("a string for an integer");
    assert_eq!(err.field(), "placement.max_rtt_ms");
    let shown = chain(&err);
    assert!(
        shown.starts_with("placement.max_rtt_ms: invalid type: string \"abc\""),
        "{shown}"
    );
    assert_eq!(shown.matches("placement.max_rtt_ms").count(), 1, "{shown}");
    let mut json: serde_json::Value =
        serde_json::to_value(Ensemble::parse(&base(), NOW_MS).expect("valid")).expect("JSON");
    json["placement"]["max_rtt_ms"] = serde_json::json!("abc");
    let err = Ensemble::parse(&json.to_string(), NOW_MS).expect_err("a string for an integer");
    let shown = chain(&err);
    assert!(
        shown.starts_with("placement.max_rtt_ms: invalid type: string \"abc\""),
        "{shown}"
    );
    assert_eq!(shown.matches("placement.max_rtt_ms").count(), 1, "{shown}");
}

/// The grouped example: two groups of two, the looser bound across them, as the matcher reads
/// it; and it places on a market of two near pairs.
#[test]
fn the_grouped_example_maps_to_latency_groups() {
    let text = std::fs::read_to_string(dir().join("grouped-4.yaml")).expect("readable");
    let spec = Ensemble::parse(&text, NOW_MS).expect("valid");
    let req = Requirements::from_ensemble(&spec);
    assert_eq!(
        req.groups,
        Some(ganglion_market::GroupRequirements {
            count: 2,
            gpus: 2,
            max_rtt_us: 2_000
        })
    );
    assert_eq!(req.max_rtt_us, Some(30_000));
    use ganglion_market::test_utils::{offer, rtt, rtx3090, snap};
    let m = snap(
        &(1..=4)
            .map(|i| offer(i, rtx3090(), 1, 1_000_000))
            .collect::<Vec<_>>(),
        &[
            rtt(1, 2, 20),
            rtt(1, 3, 1),
            rtt(1, 4, 20),
            rtt(2, 3, 20),
            rtt(2, 4, 1),
            rtt(3, 4, 20),
        ],
    );
    let plan = ganglion_market::match_gang(&req, &m).expect("two near pairs, 20 ms apart");
    let groups: Vec<(u8, Option<u32>)> = plan
        .nodes
        .iter()
        .map(|n| (n.provider[0], n.group))
        .collect();
    assert_eq!(
        groups,
        vec![(1, Some(0)), (2, Some(1)), (3, Some(0)), (4, Some(1))]
    );
}

fn base() -> String {
    std::fs::read_to_string(dir().join("single-gpu-1.yaml")).expect("readable")
}

fn invalid(text: &str) -> (String, Rule) {
    match Ensemble::parse(text, NOW_MS) {
        Err(SpecError::Invalid { field, rule }) => (field, rule),
        other => panic!("expected a validation error, got {other:?}"),
    }
}

#[test]
fn zero_gpus_rejected() {
    let (field, rule) = invalid(&base().replace("  count: 1", "  count: 0"));
    assert_eq!((field.as_str(), rule), ("gpus.count", Rule::Zero));
}

#[test]
fn deadline_equal_to_now_rejected() {
    let text = base().replace("deadline: \"+2h10m\"", &format!("deadline_ms: {NOW_MS}"));
    assert!(text.contains(&format!("deadline_ms: {NOW_MS}")), "{text}");
    let (field, _) = invalid(&text);
    assert_eq!(field, "deadline_ms");
}

#[test]
fn output_path_with_dotdot_rejected() {
    let text = base().replace("/outputs/checkpoints", "/outputs/../etc");
    let (field, rule) = invalid(&text);
    assert_eq!(field, "outputs[0].path");
    assert!(matches!(rule, Rule::BadPath { .. }));
}

#[test]
fn nvlink_on_amd_rejected() {
    let text = base().replace(
        "  min_vram_gib: 16",
        "  vendor: amd\n  interconnect: nvlink",
    );
    let (field, rule) = invalid(&text);
    assert_eq!(field, "gpus.interconnect");
    assert!(matches!(rule, Rule::WrongVendor { .. }));
}

#[test]
fn unknown_top_level_field_rejected_in_yaml_and_json() {
    let yaml = format!("{}\ngpu_count: 3\n", base());
    let err = Ensemble::parse(&yaml, NOW_MS).expect_err("unknown field");
    assert!(
        err.to_string().contains("unknown field `gpu_count`"),
        "{err}"
    );
    let json = std::fs::read_to_string(dir().join("cpu-devnet-2.json")).expect("readable");
    let json = json.replacen('{', "{ \"colour\": \"blue\",", 1);
    let err = Ensemble::parse(&json, NOW_MS).expect_err("unknown field");
    assert!(err.to_string().contains("unknown field `colour`"), "{err}");
}

#[test]
fn json_nested_error_names_the_path() {
    let json = std::fs::read_to_string(dir().join("cpu-devnet-2.json")).expect("readable");
    let json = json.replace("\"count\": 2", "\"count\": -2");
    let err = Ensemble::parse(&json, NOW_MS).expect_err("negative count");
    assert_eq!(err.field(), "gpus.count", "{err}");
}

#[test]
fn yaml_and_json_give_the_same_spec() {
    let yaml = base();
    let spec = Ensemble::parse(&yaml, NOW_MS).expect("valid");
    let json = serde_json::to_string(&spec).expect("serializable");
    assert_eq!(Ensemble::parse(&json, NOW_MS).expect("valid json"), spec);
}

/// `deadline` as a person writes it: from now, or an RFC 3339 time; never with `deadline_ms`,
/// never malformed; and not written out (the pinned spec carries `deadline_ms`).
#[test]
fn a_written_deadline_becomes_deadline_ms() {
    let base = std::fs::read_to_string(dir().join("single-gpu-1.yaml")).expect("example");
    let with = |deadline: &str| {
        let text: String = base
            .lines()
            .filter(|l| !l.starts_with("deadline"))
            .map(|l| format!("{l}\n"))
            .collect();
        format!("{text}{deadline}\n")
    };
    let spec = Ensemble::parse(&with("deadline: \"+2h10m\""), NOW_MS).expect("relative");
    assert_eq!(spec.deadline_ms, NOW_MS + 130 * 60_000);
    assert_eq!(spec.deadline, None);
    let json = serde_json::to_value(&spec).expect("JSON");
    assert!(json.get("deadline").is_none(), "{json}");
    assert_eq!(json["deadline_ms"], NOW_MS + 130 * 60_000);

    let spec =
        Ensemble::parse(&with("deadline: \"2026-01-02T00:00:00Z\""), NOW_MS).expect("RFC 3339");
    assert_eq!(spec.deadline_ms, NOW_MS + 86_400_000);

    for (line, rule) in [
        ("deadline: \"+2x\"", "neither"),
        ("deadline: \"+\"", "neither"),
        ("deadline: \"+12\"", "neither"),
        ("deadline: \"tomorrow\"", "neither"),
        ("deadline: \"+1h\"\ndeadline_ms: 1767229200000", "not both"),
    ] {
        let e = Ensemble::parse(&with(line), NOW_MS).expect_err(line);
        assert_eq!(e.field(), "deadline", "{line}: {e}");
        assert!(e.to_string().contains(rule), "{line}: {e}");
    }
    // No deadline at all: named as such.
    let e = Ensemble::parse(&with(""), NOW_MS).expect_err("none");
    assert!(
        matches!(
            e,
            SpecError::Invalid {
                rule: Rule::NoDeadline,
                ..
            }
        ),
        "{e}"
    );
    // A deadline in the past, written either way, is refused as before.
    let e = Ensemble::parse(&with("deadline: \"2025-12-31T00:00:00Z\""), NOW_MS).expect_err("past");
    assert!(matches!(
        e,
        SpecError::Invalid {
            rule: Rule::DeadlineInPast { .. },
            ..
        }
    ));
}
