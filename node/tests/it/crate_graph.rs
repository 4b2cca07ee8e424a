//! The crate graph points one way: the edges `cargo metadata` reports between project crates are
//! exactly the table in `docs/architecture.md` ("Crates"), that table has no cycle, and a
//! dev-dependency only points down it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

type Graph = BTreeMap<String, BTreeSet<String>>;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The documented graph: the rows between `<!-- crate-graph` and `<!-- /crate-graph -->`.
fn documented() -> Graph {
    let doc = std::fs::read_to_string(repo().join("docs/architecture.md")).expect("read doc");
    let start = doc
        .find("<!-- crate-graph")
        .expect("crate-graph table in docs/architecture.md");
    let end = doc
        .find("<!-- /crate-graph -->")
        .expect("end of the crate-graph table");
    let mut graph = Graph::new();
    for row in doc[start..end].lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.trim_matches('|').split('|').collect();
        let names = |cell: &str| -> BTreeSet<String> {
            cell.split(',')
                .map(|n| n.trim().trim_matches('`').to_string())
                .filter(|n| !n.is_empty())
                .collect()
        };
        let from = names(cells[0]).into_iter().next().expect("crate name");
        graph.insert(from, names(cells.get(1).copied().unwrap_or("")));
    }
    graph
}

/// The real graph from `cargo metadata`: (normal + build edges, dev edges) between project crates.
fn actual() -> (Graph, Graph) {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(repo())
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let ours: BTreeSet<String> = packages
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect();
    let (mut normal, mut dev) = (Graph::new(), Graph::new());
    for p in packages {
        let name = p["name"].as_str().expect("name").to_string();
        normal.entry(name.clone()).or_default();
        dev.entry(name.clone()).or_default();
        for d in p["dependencies"].as_array().expect("dependencies") {
            let dep = d["name"].as_str().expect("dependency name").to_string();
            if dep == name || !ours.contains(&dep) {
                continue;
            }
            let graph = if d["kind"].as_str() == Some("dev") {
                &mut dev
            } else {
                &mut normal
            };
            graph.entry(name.clone()).or_default().insert(dep);
        }
    }
    (normal, dev)
}

/// Everything `from` reaches in `graph`, not counting itself unless through a cycle.
fn reachable(graph: &Graph, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<&str> = graph
        .get(from)
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    while let Some(next) = todo.pop() {
        if seen.insert(next.to_string()) {
            todo.extend(graph.get(next).into_iter().flatten().map(String::as_str));
        }
    }
    seen
}

#[test]
fn the_crate_graph_is_the_documented_one_and_has_no_cycle() {
    let doc = documented();
    let (normal, dev) = actual();
    assert_eq!(
        normal.keys().collect::<Vec<_>>(),
        doc.keys().collect::<Vec<_>>(),
        "every project crate has one row in docs/architecture.md's crate graph"
    );
    for (name, deps) in &normal {
        let listed = &doc[name];
        let new: Vec<_> = deps.difference(listed).collect();
        let gone: Vec<_> = listed.difference(deps).collect();
        assert!(
            new.is_empty() && gone.is_empty(),
            "{name}: edges not in docs/architecture.md: {new:?}; documented edges that are gone: {gone:?}"
        );
    }
    for name in doc.keys() {
        assert!(
            !reachable(&doc, name).contains(name),
            "the crate graph has a cycle through {name}"
        );
    }
    for (name, deps) in &dev {
        for dep in deps {
            assert!(
                !reachable(&doc, dep).contains(name),
                "{name} dev-depends on {dep}, which depends on {name}: a back-edge"
            );
        }
    }
}

#[test]
fn a_back_edge_is_found() {
    // The check itself, on a graph with one edge turned around.
    let mut doc = documented();
    doc.get_mut("ganglion-contracts")
        .expect("contracts row")
        .insert("ganglion-market".into());
    assert!(reachable(&doc, "ganglion-contracts").contains("ganglion-contracts"));
}
