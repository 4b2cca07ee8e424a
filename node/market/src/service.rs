//! The parts of an ensemble spec that only a `kind: service` job has: what each replica serves
//! (`serve`), how many replicas run (`replicas`) and when their number changes (`scale`).
//!
//! A service is a job whose containers stay up and answer requests through a gateway until
//! its deadline, its budget or the orchestrator ends it. Each replica is one provider's
//! container with the spec's `gpus` (so `gpus.count` is GPUs *per replica*); replicas never
//! share a provider unless `replicas.share_providers` allows it. Field by field in
//! `docs/ensemble-spec.md`, "Services".

use serde::{Deserialize, Serialize};

use crate::spec::Rule;

/// Batch jobs end; services stay up and answer requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum JobKind {
    /// Runs to completion (training, evaluation, a batch inference pass). The default.
    #[default]
    Batch,
    /// Long-running replicas behind a gateway (`serve`, `replicas`, `scale` required).
    Service,
}

/// What one replica serves: its port, protocol and health check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Serve {
    /// TCP port the container listens on (1024–65535), on its cluster address.
    pub port: u16,
    /// Application protocol; only `http` (HTTP/1.1) today.
    #[serde(default)]
    pub protocol: ServeProtocol,
    /// How the gateway decides a replica may take requests.
    #[serde(default)]
    pub health: HealthCheck,
    /// Requests one replica takes at once; the gateway answers `503` with `Retry-After` when
    /// every healthy replica holds this many (back-pressure). Default 32.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight_per_replica: u32,
    /// Longest a forwarded request may take, seconds (the whole response, streaming included),
    /// after which the gateway answers `504`. Default 60.
    #[serde(default = "default_request_timeout_s")]
    pub request_timeout_s: u32,
    /// Whether `POST` requests may be retried on another replica when the first one fails
    /// before answering (an inference call without side effects). `GET`, `HEAD`, `PUT`,
    /// `DELETE` and `OPTIONS` are idempotent by RFC 9110 §9.2.2 and always may. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retry_post: bool,
    /// Nodes besides the orchestrator's that may route the service: libp2p peer ids
    /// (base58btc, as `ganglion node info` prints them), at most [`MAX_GATEWAYS`]. Each such
    /// node with `[gateway] listen` serves `/<service>/…` too, reaching the replicas over
    /// libp2p; a provider lets the job's orchestrator and these peers — no one else — through
    /// to its replica. Only the orchestrator's gateway scales the service and counts the usage
    /// its receipts carry. Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<String>,
}

/// Most peers `serve.gateways` names.
pub const MAX_GATEWAYS: usize = 16;

/// Whether `id` reads as a libp2p peer id in its usual text form: base58btc of a multihash,
/// 46 characters (`Qm…`, SHA-256 of an RSA key) to 59 (`12D3KooW…` and longer identity
/// hashes). The node parses it for good before it routes or admits it.
fn peer_id_like(id: &str) -> bool {
    const BASE58: &str = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
    (46..=59).contains(&id.len()) && id.chars().all(|c| BASE58.contains(c))
}

fn default_max_in_flight() -> u32 {
    32
}

fn default_request_timeout_s() -> u32 {
    60
}

/// Application protocol of a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ServeProtocol {
    /// HTTP/1.1; chunked and server-sent-event responses pass through as they stream.
    #[default]
    Http,
}

/// `serve.health`: an HTTP `GET` that must answer 2xx within `timeout_s`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthCheck {
    /// Path probed, absolute (starts with `/`). Default `/health`.
    pub path: String,
    /// Seconds between probes (≥ 1). Default 5. A replica that fails is out of rotation
    /// within two intervals.
    pub interval_s: u32,
    /// Seconds a probe may take (≥ 1, ≤ `interval_s`). Default 2.
    pub timeout_s: u32,
}

impl Default for HealthCheck {
    fn default() -> Self {
        Self {
            path: "/health".into(),
            interval_s: 5,
            timeout_s: 2,
        }
    }
}

/// `replicas`: how many replicas may run at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replicas {
    /// Replicas always kept (≥ 1): the hot standby.
    pub min: u32,
    /// Replicas at most (≥ `min`). The escrow's GPU count is `max × gpus.count`.
    pub max: u32,
    /// Whether two replicas may run on one provider. Default false: a provider's loss then
    /// takes one replica at most.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub share_providers: bool,
}

/// `scale`: when the orchestrator's node adds or releases a replica. Exactly one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scale {
    /// Requests in flight per healthy replica above which one more is wanted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_in_flight_per_replica: Option<u32>,
    /// 90th-percentile latency, ms, above which one more replica is wanted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_p90_ms: Option<u32>,
    /// Seconds the load must stay above target before a replica is added (≥ 1).
    pub up_after_s: u32,
    /// Seconds the load must stay below target before a replica is released (≥ 1).
    pub down_after_s: u32,
}

/// The target a [`Scale`] names, read once it is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleTarget {
    /// Requests in flight per healthy replica.
    InFlightPerReplica(u32),
    /// 90th-percentile latency, ms.
    P90Ms(u32),
}

impl Scale {
    /// The one target this scale names; `None` when it names none or both (a spec that
    /// passed [`validate`] always names one).
    pub fn target(&self) -> Option<ScaleTarget> {
        match (self.target_in_flight_per_replica, self.target_p90_ms) {
            (Some(n), None) => Some(ScaleTarget::InFlightPerReplica(n)),
            (None, Some(ms)) => Some(ScaleTarget::P90Ms(ms)),
            _ => None,
        }
    }
}

/// The service fields of a spec, checked together with its `kind`; returns the first broken
/// rule as `(field, rule)`, in document order.
pub(crate) fn validate(
    kind: JobKind,
    serve: Option<&Serve>,
    replicas: Option<&Replicas>,
    scale: Option<&Scale>,
) -> Result<(), (String, Rule)> {
    let bad = |field: &str, rule: Rule| Err((field.to_string(), rule));
    if kind == JobKind::Batch {
        for (field, given) in [
            ("serve", serve.is_some()),
            ("replicas", replicas.is_some()),
            ("scale", scale.is_some()),
        ] {
            if given {
                return bad(field, Rule::ServiceOnly);
            }
        }
        return Ok(());
    }
    let Some(serve) = serve else {
        return bad("serve", Rule::ServiceNeeds);
    };
    let Some(replicas) = replicas else {
        return bad("replicas", Rule::ServiceNeeds);
    };
    if serve.port < 1024 {
        return bad("serve.port", Rule::BadPort(serve.port));
    }
    let h = &serve.health;
    if !h.path.starts_with('/') || h.path.chars().any(|c| c.is_whitespace() || c == '#') {
        return bad("serve.health.path", Rule::BadUrlPath(h.path.clone()));
    }
    if h.interval_s == 0 {
        return bad("serve.health.interval_s", Rule::Zero);
    }
    if h.timeout_s == 0 {
        return bad("serve.health.timeout_s", Rule::Zero);
    }
    if h.timeout_s > h.interval_s {
        return bad(
            "serve.health.timeout_s",
            Rule::AboveField {
                value: h.timeout_s,
                other: "serve.health.interval_s",
                limit: h.interval_s,
            },
        );
    }
    if serve.max_in_flight_per_replica == 0 {
        return bad("serve.max_in_flight_per_replica", Rule::Zero);
    }
    if serve.request_timeout_s == 0 {
        return bad("serve.request_timeout_s", Rule::Zero);
    }
    if serve.gateways.len() > MAX_GATEWAYS {
        return bad(
            "serve.gateways",
            Rule::TooMany {
                count: serve.gateways.len(),
                limit: MAX_GATEWAYS,
            },
        );
    }
    for (i, g) in serve.gateways.iter().enumerate() {
        if !peer_id_like(g) {
            return bad(&format!("serve.gateways[{i}]"), Rule::BadPeerId(g.clone()));
        }
        if serve.gateways[..i].contains(g) {
            return bad(&format!("serve.gateways[{i}]"), Rule::Duplicate(g.clone()));
        }
    }
    if replicas.min == 0 {
        return bad("replicas.min", Rule::Zero);
    }
    if replicas.min > replicas.max {
        return bad(
            "replicas.min",
            Rule::AboveField {
                value: replicas.min,
                other: "replicas.max",
                limit: replicas.max,
            },
        );
    }
    let Some(scale) = scale else {
        // Without `scale` the service keeps `min` replicas; `max` must then equal it.
        return if replicas.max == replicas.min {
            Ok(())
        } else {
            bad(
                "scale",
                Rule::ScaleNeeded {
                    max: replicas.max,
                    min: replicas.min,
                },
            )
        };
    };
    match (scale.target_in_flight_per_replica, scale.target_p90_ms) {
        (None, None) => return bad("scale", Rule::ScaleTarget),
        (Some(_), Some(_)) => {
            return bad(
                "scale.target_in_flight_per_replica",
                Rule::Conflicts {
                    other: "scale.target_p90_ms",
                },
            );
        }
        (Some(0), None) => return bad("scale.target_in_flight_per_replica", Rule::Zero),
        (Some(n), None) if n > serve.max_in_flight_per_replica => {
            return bad(
                "scale.target_in_flight_per_replica",
                Rule::AboveField {
                    value: n,
                    other: "serve.max_in_flight_per_replica",
                    limit: serve.max_in_flight_per_replica,
                },
            );
        }
        (None, Some(0)) => return bad("scale.target_p90_ms", Rule::Zero),
        _ => {}
    }
    if scale.up_after_s == 0 {
        return bad("scale.up_after_s", Rule::Zero);
    }
    if scale.down_after_s == 0 {
        return bad("scale.down_after_s", Rule::Zero);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::Ensemble;
    use crate::service::{JobKind, ScaleTarget};

    /// 2026-01-01T00:00:00Z, POSIX ms.
    const NOW_MS: u64 = 1_767_225_600_000;

    const BASE: &str = r#"
image: { local: ganglion/embed-cpu:latest }
command: ["python3", "/workloads/embed_server.py"]
gpus: { count: 2 }
limits: { max_duration_s: 3600, max_rate_ntx_per_gpu_hour: 1000 }
budget_ntx: 10000
deadline: "+2h"
"#;

    #[test]
    fn a_batch_spec_reads_and_writes_without_any_service_field() {
        let spec = Ensemble::parse(BASE, NOW_MS).expect("valid batch spec");
        assert_eq!(spec.kind, JobKind::Batch);
        let json = serde_json::to_value(&spec).expect("serializes");
        for field in ["kind", "serve", "replicas", "scale"] {
            assert!(json.get(field).is_none(), "{field} written: {json}");
        }
        assert_eq!(spec.escrow_terms().gpus, 2);
    }

    #[test]
    fn a_service_takes_its_defaults_and_pays_for_its_most_replicas() {
        let text = format!(
            "{BASE}kind: service\nserve: {{ port: 8000 }}\nreplicas: {{ min: 2, max: 5 }}\n\
             scale: {{ target_p90_ms: 250, up_after_s: 5, down_after_s: 60 }}\n"
        );
        let spec = Ensemble::parse(&text, NOW_MS).expect("valid service");
        let serve = spec.serve.as_ref().expect("serve");
        assert_eq!(serve.health.path, "/health");
        assert_eq!((serve.health.interval_s, serve.health.timeout_s), (5, 2));
        assert_eq!(serve.max_in_flight_per_replica, 32);
        assert!(!serve.retry_post);
        let scale = spec.scale.expect("scale");
        assert_eq!(scale.target(), Some(ScaleTarget::P90Ms(250)));
        // Five replicas of two GPUs each at most.
        assert_eq!(spec.escrow_terms().gpus, 10);
        // The pinned form reads back equal.
        let again: Ensemble =
            serde_json::from_value(serde_json::to_value(&spec).expect("json")).expect("reads");
        assert_eq!(again, spec);
    }

    /// A libp2p peer id as `ganglion node info` prints one (ed25519).
    const GATEWAY: &str = "12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA";

    #[test]
    fn a_service_names_the_gateways_besides_its_orchestrators() {
        let text = format!(
            "{BASE}kind: service\nserve: {{ port: 8000, gateways: [{GATEWAY}] }}\n\
             replicas: {{ min: 1, max: 1 }}\n"
        );
        let spec = Ensemble::parse(&text, NOW_MS).expect("valid service");
        assert_eq!(spec.serve.as_ref().expect("serve").gateways, [GATEWAY]);
        let json = serde_json::to_value(&spec).expect("json");
        assert_eq!(json["serve"]["gateways"][0], GATEWAY);
        // None named: the field is not written (the pinned spec of a service without it is
        // unchanged).
        let plain = format!(
            "{BASE}kind: service\nserve: {{ port: 8000 }}\nreplicas: {{ min: 1, max: 1 }}\n"
        );
        let spec = Ensemble::parse(&plain, NOW_MS).expect("valid service");
        let json = serde_json::to_value(&spec).expect("json");
        assert!(json["serve"].get("gateways").is_none(), "{json}");
    }

    #[test]
    fn a_services_replicas_each_take_one_machine_with_exactly_their_gpus() {
        use crate::test_utils::{offer, providers, rtx3090, snap};
        let text = format!(
            "{BASE}kind: service\nserve: {{ port: 8000 }}\nreplicas: {{ min: 2, max: 2 }}\n"
        );
        let spec = Ensemble::parse(&text, NOW_MS).expect("valid service");
        let req = crate::Requirements::from_ensemble(&spec);
        assert_eq!(
            (req.count, req.min_gpus_per_node, req.max_gpus_per_node),
            (4, 2, Some(2))
        );
        assert!(!req.collective);
        // A cheap 4-GPU machine could hold both replicas, but each replica takes its own
        // provider: two machines with two GPUs each, no RTT measured between them needed.
        let m = snap(
            &[
                offer(1, rtx3090(), 4, 5),
                offer(2, rtx3090(), 2, 10),
                offer(3, rtx3090(), 1, 1),
            ],
            &[],
        );
        let plan = crate::match_gang(&req, &m).expect("fits");
        let chosen = providers(&plan);
        assert_eq!(chosen.len(), 2, "{chosen:?}");
        assert!(chosen.iter().all(|(_, gpus)| *gpus == 2), "{chosen:?}");
    }

    #[test]
    fn service_rules_name_their_field() {
        let service = |extra: &str| format!("{BASE}kind: service\n{extra}");
        let cases = [
            (
                service("serve: { port: 80 }\nreplicas: { min: 1, max: 1 }\n"),
                "serve.port",
            ),
            (
                service(
                    "serve: { port: 8000, health: { path: health, interval_s: 1, timeout_s: 1 } }\n\
                     replicas: { min: 1, max: 1 }\n",
                ),
                "serve.health.path",
            ),
            (
                service("serve: { port: 8000 }\nreplicas: { min: 0, max: 1 }\n"),
                "replicas.min",
            ),
            (
                service(
                    "serve: { port: 8000, max_in_flight_per_replica: 4 }\nreplicas: { min: 1, max: 2 }\n\
                     scale: { target_in_flight_per_replica: 8, up_after_s: 1, down_after_s: 1 }\n",
                ),
                "scale.target_in_flight_per_replica",
            ),
            (
                service(
                    "serve: { port: 8000 }\nreplicas: { min: 1, max: 2 }\n\
                     scale: { up_after_s: 1, down_after_s: 1 }\n",
                ),
                "scale",
            ),
            (
                service(
                    "serve: { port: 8000 }\nreplicas: { min: 1, max: 2 }\n\
                     scale: { target_p90_ms: 100, up_after_s: 0, down_after_s: 1 }\n",
                ),
                "scale.up_after_s",
            ),
            (
                format!("{BASE}scale: {{ up_after_s: 1, down_after_s: 1 }}\n"),
                "scale",
            ),
            (
                service(
                    "serve: { port: 8000, gateways: [\"12D3KooW0OIl\"] }\nreplicas: { min: 1, max: 1 }\n",
                ),
                "serve.gateways[0]",
            ),
            (
                service(&format!(
                    "serve: {{ port: 8000, gateways: [{}] }}\nreplicas: {{ min: 1, max: 1 }}\n",
                    vec![format!("\"{GATEWAY}\""); super::MAX_GATEWAYS + 1].join(", ")
                )),
                "serve.gateways",
            ),
            (
                service(&format!(
                    "serve: {{ port: 8000, gateways: [{GATEWAY}, {GATEWAY}] }}\nreplicas: {{ min: 1, max: 1 }}\n"
                )),
                "serve.gateways[1]",
            ),
            (format!("{BASE}kind: daemon\n"), "kind"),
            (
                service(
                    "serve: { port: 8000 }\nreplicas: { min: 1, max: 1 }\nplacement: { max_nodes: 2 }\n",
                ),
                "placement",
            ),
            (
                service(
                    "serve: { port: 8000 }\nreplicas: { min: 1, max: 1 }\ndistributed: { framework: torch }\n",
                ),
                "distributed",
            ),
        ];
        for (text, field) in cases {
            let err = Ensemble::parse(&text, NOW_MS).expect_err(field);
            assert_eq!(err.field(), field, "{err}");
        }
    }
}
