//! `audit verify` on the settled job of [`super::settle`]: every check passes from the
//! orchestrator's node (its indexer, its blockstore, results and logs fetched over bitswap
//! from the providers); the same evidence, changed one item at a time, fails exactly the
//! check about that item; and the read-only `audit_*`, `market_*`, `provider_*` methods and
//! `job_logs` / `job_outputs` over HTTP, happy and bad-params paths.

use std::sync::Arc;

use cid::Cid;
use ganglion_contracts::v2::datum::JobId;
use ganglion_dispatch::executor::Executor;
use ganglion_indexer::event::Event;
use ganglion_node::audit::service::AuditService;
use ganglion_node::audit::{self, Evidence, Report, checks};
use ganglion_node::rpc::Api;
use ganglion_node::settings::Settings;
use ganglion_rpc::audit::{
    AuditJob, AuditProvider, AuditReport, BondInfo, JobLog, JobOutput, MarketOffer,
};
use ganglion_rpc::error as codes;
use ganglion_storage::blockstore::Blockstore;
use jsonrpsee::core::client::{ClientT, Error as ClientError};
use jsonrpsee::http_client::HttpClientBuilder;
use jsonrpsee::rpc_params;

use super::support::Node;

fn failed(r: &Report) -> Vec<&str> {
    r.checks
        .iter()
        .filter(|c| !c.pass)
        .map(|c| c.name.as_str())
        .collect()
}

/// The report with every check printed when it does not pass as expected.
fn assert_fails_only(r: &Report, names: &[&str], what: &str) {
    assert!(!r.pass, "{what}: the report still passes: {r:#?}");
    assert_eq!(failed(r), names, "{what}: {r:#?}");
}

/// The claims' attestations of `e`, by assignment index.
fn claim_attestations(
    e: &mut Evidence,
) -> Vec<(u64, &mut ganglion_contracts::v2::redeemer::Attestation)> {
    e.job
        .history
        .iter_mut()
        .filter_map(|r| match &mut r.event {
            Event::JobClaimed {
                index, attestation, ..
            } => Some((*index, attestation)),
            _ => None,
        })
        .collect()
}

/// The check names (`<kind>[i]`) of every claim naming `root` as its result or logs: two
/// providers writing identical bytes attest the same CID.
fn holders<'a>(e: &Evidence, kind: &str, root: &Cid) -> Vec<&'a str> {
    let mut e = e.clone();
    let mut out: Vec<(u64, String)> = claim_attestations(&mut e)
        .into_iter()
        .filter(|(_, a)| {
            let c = if kind == "result_cid" {
                &a.result
            } else {
                &a.logs
            };
            Cid::try_from(c.as_slice()).ok() == Some(*root)
        })
        .map(|(i, _)| (i, format!("{kind}[{i}]")))
        .collect();
    out.sort();
    out.into_iter()
        .map(|(_, n)| &*Box::leak(n.into_boxed_str()))
        .collect()
}

/// Tamper cases: each changes one item of real evidence.
fn tampered_evidence_fails_the_right_check(e: &Evidence) {
    // A wrong attestation signature.
    let mut t = e.clone();
    let (i, att) = claim_attestations(&mut t).remove(0);
    att.signature[0] ^= 1;
    assert_fails_only(
        &checks::check(&t),
        &[&format!("attestation[{i}]")],
        "flipped attestation signature",
    );

    // A wrong receipt signature.
    let mut t = e.clone();
    let mut k = None;
    for r in &mut t.job.history {
        if let Event::JobClaimed {
            index,
            receipt: Some(receipt),
            ..
        } = &mut r.event
            && k.is_none()
        {
            receipt.signature[0] ^= 1;
            k = Some(*index);
        }
    }
    let k = k.expect("a claim carried a receipt");
    let r = checks::check(&t);
    assert!(!r.pass, "flipped receipt: {r:#?}");
    assert!(
        failed(&r).contains(&format!("receipt[{k}]").as_str()),
        "{r:#?}"
    );

    // A wrong acceptance signature.
    let mut t = e.clone();
    for r in &mut t.job.history {
        if let Event::JobAssigned { acceptances, .. } = &mut r.event {
            acceptances[1][5] ^= 0x80;
        }
    }
    assert_fails_only(&checks::check(&t), &["acceptance[1]"], "flipped acceptance");

    // A result block whose bytes do not hash to its CID.
    let mut t = e.clone();
    let att = claim_attestations(&mut t)[0].1.clone();
    let root = Cid::try_from(att.result.as_slice()).expect("result CID");
    t.blocks.get_mut(&root).expect("result block held")[0] ^= 1;
    let names = holders(e, "result_cid", &root);
    assert_fails_only(&checks::check(&t), &names, "result block changed");

    // A log DAG with its root block missing (not fetchable).
    let mut t = e.clone();
    let logs = Cid::try_from(att.logs.as_slice()).expect("logs CID");
    t.blocks.remove(&logs);
    let names = holders(e, "logs_cid", &logs);
    assert_fails_only(&checks::check(&t), &names, "logs missing");

    // Spec bytes that no longer hash to the escrow's CID.
    let mut t = e.clone();
    let spec = Cid::try_from(t.job.spec.as_slice()).expect("spec CID");
    t.blocks.get_mut(&spec).expect("spec block")[3] ^= 1;
    let r = checks::check(&t);
    assert!(failed(&r).contains(&"spec_cid"), "{r:#?}");

    // A payment that breaks the escrow rule (one NTX too many).
    let mut t = e.clone();
    let mut k0 = None;
    for r in &mut t.job.history {
        if let Event::JobClaimed { index, paid, .. } = &mut r.event
            && k0.is_none()
        {
            *paid += 1;
            k0 = Some(*index);
        }
    }
    let k0 = k0.expect("a claim");
    let r = checks::check(&t);
    assert!(!r.pass);
    assert!(
        failed(&r).contains(&format!("payment[{k0}]").as_str()),
        "{r:#?}"
    );

    // An assignment naming an attest key the provider never bonded: the bond check fails
    // (and the signatures, made by the bonded key, no longer verify under it).
    let mut t = e.clone();
    for r in &mut t.job.history {
        if let Event::JobAssigned { assignments, .. } = &mut r.event {
            assignments[0].attest_key = [7; 32];
        }
    }
    let r = checks::check(&t);
    assert!(!r.pass);
    assert!(failed(&r).contains(&"bond_key[0]"), "{r:#?}");
}

/// Runs the audit of the settled `job` from the orchestrator's node and the RPC checks.
pub(crate) async fn audit_settled_job<E: Executor + 'static, F: Executor + 'static>(
    orch: &Node<E>,
    providers: &[&Node<F>],
    job: &JobId,
) {
    // The orchestrator never held the results or logs: they come over bitswap.
    let evidence = audit::evidence::gather(
        &orch.indexer,
        orch.blocks.as_ref() as &dyn Blockstore,
        Some(&orch.p2p),
        job,
    )
    .await
    .expect("evidence gathered");
    assert!(
        evidence.fetch_errors.is_empty(),
        "{:?}",
        evidence.fetch_errors
    );
    let report = checks::check(&evidence);
    assert!(report.pass, "audit of a settled job: {report:#?}");
    for c in &report.checks {
        eprintln!(
            "{}  {:<16} {}",
            if c.pass { "pass" } else { "FAIL" },
            c.name,
            c.detail
        );
    }
    let names: Vec<_> = report.checks.iter().map(|c| c.name.as_str()).collect();
    for n in [
        "status",
        "spec_cid",
        "spec_terms",
        "assignment",
        "bond_key[0]",
        "acceptance[1]",
        "attestation[0]",
        "receipt[1]",
        "claim_bound[1]",
        "result_cid[0]",
        "logs_cid[1]",
        "payment[0]",
        "payment[1]",
        "refund",
    ] {
        assert!(names.contains(&n), "check {n} missing from {names:?}");
    }
    tampered_evidence_fails_the_right_check(&evidence);

    // Over JSON-RPC (read-only methods: no token).
    let settings = Settings::from_toml(&format!(
        "network = \"devnet\"\ndata_dir = \"{}\"",
        orch.dir.join("rpc").display()
    ))
    .expect("settings");
    let module = Api::new(settings)
        .expect("api")
        .with_audit(
            AuditService::new(
                orch.indexer.clone(),
                orch.blocks.clone() as Arc<dyn Blockstore>,
            )
            .with_p2p(orch.p2p.clone())
            .with_provider(providers[0].key_hash),
        )
        .into_module()
        .expect("the namespaces merge");
    let running = ganglion_rpc::server::start("127.0.0.1:0".parse().expect("addr"), "t", module)
        .await
        .expect("serves");
    let c = HttpClientBuilder::default()
        .build(format!("http://{}", running.addr))
        .expect("client");
    let id = hex::encode(job.0);
    let code = |e: ClientError| match e {
        ClientError::Call(o) => o.code(),
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    };

    let r: AuditReport = c
        .request("audit_verify", rpc_params![id.clone()])
        .await
        .expect("audit_verify");
    assert!(r.pass, "{r:#?}");
    assert_eq!(r.checks.len(), report.checks.len());
    let j: AuditJob = c
        .request("audit_job", rpc_params![id.clone()])
        .await
        .expect("audit_job");
    assert_eq!(j.status, "claimed");
    assert_eq!(
        j.txs.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>(),
        ["lock", "assign", "claim", "claim"]
    );
    assert_eq!(j.assignments.len(), 2);
    let paid: u64 = j.assignments.iter().map(|a| a.paid.expect("paid")).sum();
    assert_eq!(j.refund.map(|r| r.get()), Some(j.budget.get() - paid));
    for a in &j.assignments {
        let att = a.attestation.as_ref().expect("attested");
        assert!(
            att.result.starts_with('b') && att.logs.starts_with('b'),
            "{att:?}"
        );
    }
    let p = &providers[0];
    let by_key: AuditProvider = c
        .request("audit_provider", rpc_params![hex::encode(p.key_hash)])
        .await
        .expect("audit_provider by key");
    assert_eq!(by_key.jobs, std::slice::from_ref(&id));
    let mine = j
        .assignments
        .iter()
        .find(|a| a.provider == hex::encode(p.key_hash))
        .expect("assigned");
    assert_eq!(by_key.earnings, mine.paid.expect("paid"));
    assert_eq!(by_key.bonds.len(), 1);
    let peer = by_key.bonds[0].peer_id.clone();
    let by_peer: AuditProvider = c
        .request("audit_provider", rpc_params![peer])
        .await
        .expect("audit_provider by peer id");
    assert_eq!(by_peer, by_key);
    let offers: Vec<MarketOffer> = c
        .request("market_offers", rpc_params![])
        .await
        .expect("market_offers");
    assert!(offers.len() >= 2, "{offers:?}");
    let bond: Vec<BondInfo> = c
        .request("provider_bond", rpc_params![])
        .await
        .expect("provider_bond");
    assert_eq!(bond, by_key.bonds);

    // The attested logs (read-only) and outputs (written to a directory: token required),
    // fetched over bitswap by the orchestrator, which never held them.
    let logs: Vec<JobLog> = c
        .request("job_logs", rpc_params![id.clone()])
        .await
        .expect("job_logs");
    assert_eq!(logs.len(), 2, "{logs:?}");
    for l in &logs {
        let a = &j.assignments[usize::try_from(l.index).expect("index")];
        assert_eq!(l.error, None, "{l:?}");
        assert_eq!(l.provider, a.provider);
        assert_eq!(l.cid, a.attestation.as_ref().expect("attested").logs);
        assert!(l.text.contains("probe done"), "{l:?}");
        assert_eq!(l.bytes, l.text.len() as u64);
    }
    let out_dir = orch.dir.join("job-outputs");
    let e = c
        .request::<Vec<JobOutput>, _>(
            "job_outputs",
            rpc_params![id.clone(), out_dir.display().to_string()],
        )
        .await
        .expect_err("job_outputs without the token");
    assert_eq!(code(e), codes::UNAUTHORIZED);
    assert!(!out_dir.exists(), "nothing written without the token");
    let mut h = jsonrpsee::http_client::HeaderMap::new();
    h.insert(
        "authorization",
        jsonrpsee::http_client::HeaderValue::from_static("Bearer t"),
    );
    let authed = HttpClientBuilder::default()
        .set_headers(h)
        .build(format!("http://{}", running.addr))
        .expect("client");
    let outs: Vec<JobOutput> = authed
        .request(
            "job_outputs",
            rpc_params![id.clone(), out_dir.display().to_string()],
        )
        .await
        .expect("job_outputs");
    assert_eq!(outs.len(), 2, "{outs:?}");
    for o in &outs {
        let a = &j.assignments[usize::try_from(o.index).expect("index")];
        assert_eq!(o.error, None, "{o:?}");
        assert_eq!(o.cid, a.attestation.as_ref().expect("attested").result);
        let result = o
            .files
            .iter()
            .find(|f| f.path == "result.bin")
            .expect("result.bin listed");
        assert_eq!(result.bytes, 4096);
        let written = out_dir.join(format!("rank-{}", o.index));
        assert_eq!(
            o.written_to.as_deref(),
            Some(written.to_str().expect("utf-8"))
        );
        let bytes = std::fs::read(written.join("result.bin")).expect("result.bin written");
        assert_eq!(bytes.len(), 4096);
        // The directory written re-imports to the attested CID.
        let again = ganglion_storage::unixfs::import_dir(
            &written,
            &ganglion_storage::unixfs::ImportOptions::cid_v1(),
            ganglion_storage::unixfs::HashOnly::default(),
        )
        .expect("re-import");
        assert_eq!(again.root.to_string(), o.cid);
    }

    // Bad params and unknown ids: JSON-RPC errors, the server keeps serving.
    for (method, param, want) in [
        ("audit_verify", "xyz", codes::INVALID_PARAMS),
        ("audit_job", "00", codes::INVALID_PARAMS),
        ("audit_job", &"ab".repeat(32) as &str, codes::JOB),
        ("audit_verify", &"cd".repeat(32), codes::JOB),
        ("audit_provider", "not-a-key", codes::INVALID_PARAMS),
        ("job_logs", "xyz", codes::INVALID_PARAMS),
        ("job_logs", &"ab".repeat(32), codes::JOB),
    ] {
        let e = c
            .request::<serde_json::Value, _>(method, rpc_params![param])
            .await
            .expect_err(method);
        assert_eq!(code(e), want, "{method}({param})");
    }
    let e = c
        .request::<serde_json::Value, _>("audit_job", rpc_params![])
        .await
        .expect_err("missing param");
    assert_eq!(code(e), codes::INVALID_PARAMS);
    let _ = running.handle.stop();
}
