//! MIG slices in the offer and the matcher (field case "NVIDIA MIG with sparse indices"): an
//! A100-PCIE-40GB with three GPU instances. The NVML inventory itself is `gpu::nvml`'s; here the
//! GPU records are built as the inventory lists them (parent with MIG mode on, one record per
//! slice with its own `MIG-…` UUID and memory and the parent's PCI bus id).

use ganglion_dispatch::gpu::declared::{DeclaredGpu, to_gpus};
use ganglion_dispatch::gpu::{Gpu, Source};
use ganglion_market::limits::OfferTerms;
use ganglion_market::spec::{ComputeCapability, Vendor};
use ganglion_market::{
    Binding, Constraint, Ensemble, MarketSnapshot, Offer, ProviderLimits, Requirements,
    SnapshotOptions, match_gang,
};

use ganglion_market::test_utils::{providers, req};

const PARENT: &str = "GPU-3b722aa5-db24-5b93-84c8-e4e0efcef078";
const SLICES: [(&str, &str, u64); 3] = [
    (
        "MIG-23de08f7-6fcc-5be3-9094-cc3b4162f0bb",
        "3g.20gb",
        19_968,
    ),
    ("MIG-9d822d55-dc61-5acb-8c24-544828b47b03", "2g.10gb", 9_984),
    ("MIG-5f16849a-8ae9-571a-bc2c-486916c4a324", "1g.5gb", 4_864),
];

/// The parent and its three slices; `card` varies the UUIDs and bus id for a second machine.
fn a100_with_mig(card: u8) -> Vec<Gpu> {
    let base = to_gpus(&[DeclaredGpu {
        name: "NVIDIA A100-PCIE-40GB".into(),
        vendor: Vendor::Nvidia,
        vram_gib: 40,
        compute_capability: Some(ComputeCapability { major: 8, minor: 0 }),
        gfx_target: None,
        count: 1,
    }])
    .remove(0);
    let bus = format!("0000:{card:02x}:00.0");
    let uuid = |u: &str| {
        if card == 0 {
            u.to_string()
        } else {
            format!("{u}-{card}")
        }
    };
    let mut parent = Gpu {
        source: Source::Nvml,
        uuid: Some(uuid(PARENT)),
        pci_bus_id: Some(bus.clone()),
        mig_enabled: Some(true),
        ..base.clone()
    };
    parent.vram_total_mib = 40_960;
    let mut gpus = vec![parent];
    for (i, (id, profile, mib)) in SLICES.iter().enumerate() {
        gpus.push(Gpu {
            index: i as u32,
            source: Source::Nvml,
            name: format!("NVIDIA A100-PCIE-40GB MIG {profile}"),
            uuid: Some(uuid(id)),
            vram_total_mib: *mib,
            pci_bus_id: Some(bus.clone()),
            mig_enabled: None,
            ..base.clone()
        });
    }
    gpus
}

fn limits() -> ProviderLimits {
    ProviderLimits {
        pool: None,
        price_ntx_per_gpu_hour: 10,
        max_concurrent_jobs: 1,
        max_job_duration_s: None,
        max_job_nodes: None,
        allow_images: vec![],
        refuse_images: vec![],
        fabric: None,
    }
}

fn offer_of(provider: u8, gpus: &[Gpu], in_use: &[String]) -> Offer {
    let terms = OfferTerms {
        provider: [provider; 28],
        bond_gpus: 8,
        score: 100,
        uplink_mbps: 10_000,
        direct_capable: false,
    };
    let pooled = limits().pooled(gpus).expect("every GPU");
    limits().offer(terms, &pooled, in_use)
}

#[test]
fn slices_are_offered_by_their_own_uuid_and_memory_never_with_the_parent() {
    let gpus = a100_with_mig(0);
    let o = offer_of(1, &gpus, &[SLICES[1].0.to_string()]);
    let got: Vec<(&str, u64, u32, Option<&str>)> = o
        .gpus
        .iter()
        .map(|g| {
            (
                g.model.name.as_str(),
                g.model.vram_mib,
                g.free,
                g.model.mig_parent.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("NVIDIA A100-PCIE-40GB MIG 3g.20gb", 19_968, 1, Some(PARENT)),
            ("NVIDIA A100-PCIE-40GB MIG 2g.10gb", 9_984, 0, Some(PARENT)),
            ("NVIDIA A100-PCIE-40GB MIG 1g.5gb", 4_864, 1, Some(PARENT)),
        ],
        "three slices, the busy one (by its MIG UUID) not free, no whole 40 GB GPU"
    );
    // A pool entry names one slice by its UUID.
    let mut l = limits();
    l.pool = Some(vec![SLICES[2].0.to_string()]);
    let picked = l.pooled(&gpus).expect("the slice exists");
    assert_eq!(picked.len(), 1);
    assert_eq!(picked[0].uuid.as_deref(), Some(SLICES[2].0));
}

fn snap(offers: &[Offer]) -> MarketSnapshot {
    MarketSnapshot::build(offers, &[], SnapshotOptions::default()).expect("distinct providers")
}

#[test]
fn a_collective_job_never_gets_two_slices_of_one_card() {
    let one = snap(&[offer_of(1, &a100_with_mig(0), &[])]);
    let mut r = req(2);
    r.collective = true;
    let no = match_gang(&r, &one).expect_err("two slices of one card have no peer path");
    assert_eq!(
        no.binding,
        Binding::MigSlices {
            slices_excluded: 2,
            eligible_without: 3
        },
        "{no}"
    );
    assert!(
        no.to_string().contains("at most one MIG slice per card"),
        "{no}"
    );
    assert!(
        no.excluded
            .iter()
            .any(|e| e.constraint == Constraint::MigSlices && e.gpus == 2)
    );
    // Independent ranks (no collectives) may share the card.
    r.collective = false;
    assert_eq!(
        providers(&match_gang(&r, &one).expect("fits")),
        vec![(1, 2)]
    );
    // Two cards on two machines: one slice of each.
    let two = snap(&[
        offer_of(1, &a100_with_mig(0), &[]),
        offer_of(2, &a100_with_mig(1), &[]),
    ]);
    r.collective = true;
    assert_eq!(
        providers(&match_gang(&r, &two).expect("one slice per card")),
        vec![(1, 1), (2, 1)]
    );
    // A single-GPU job takes a slice by its class: 2g.10gb (9 984 MiB) meets 10 GB.
    let mut r = req(1);
    r.min_vram_gib = 10;
    assert!(match_gang(&r, &one).is_ok());
    r.min_vram_gib = 24;
    let no = match_gang(&r, &one).expect_err("no slice of 24 GB and the parent is not offered");
    assert_eq!(no.binding.constraint(), Constraint::Vram, "{no}");
}

#[test]
fn collective_comes_from_the_framework_and_the_gpu_count() {
    let spec = |framework: &str, count: u32| {
        let text = format!(
            r#"
image: {{ local: "img" }}
command: ["run"]
gpus: {{ count: {count} }}
distributed: {{ framework: {framework} }}
limits: {{ max_duration_s: 60, max_rate_ntx_per_gpu_hour: 1 }}
budget_ntx: 1
deadline_ms: 99999999999999
"#
        );
        let e = Ensemble::parse(&text, 1).expect("valid");
        Requirements::from_ensemble(&e).collective
    };
    assert!(spec("torch", 2));
    assert!(spec("mpi", 4));
    assert!(!spec("none", 2), "independent ranks");
    assert!(!spec("torch", 1), "one GPU has no peer");
}
