//! Akash SDL → ensemble spec: the GPU part of an Akash deployment, carried into `gpus` and
//! `placement` (`ganglion job import-sdl`), or refused naming the SDL field that cannot be.
//!
//! Input ([`import`]): a whole SDL v2 document (`services`, `profiles`, `deployment`; see
//! `sdl_full` for what of it is carried), or one compute profile's `resources.gpu` block and
//! the deployment `count` of its service as one YAML mapping `{count, gpu}` (`id`, a label, is
//! allowed and not carried). This is the
//! shape of `shared/fixtures/field/akash-sdl/sdl-gpu-fragments.yaml`; the grammar is Akash's
//! `go/sdl/gpu.go` (akash-network/chain-sdk): `gpu.units`, `gpu.attributes.vendor.nvidia[]`
//! entries `{model, ram, interface}`, and `gpu.attributes.interconnect` (`[]` = the group
//! `auto`, `{group: NAME}`).
//!
//! # Mapping
//! - Akash places each replica (pod) on one node and may spread the `count` replicas:
//!   `gpus.count = units × count`, `placement.min_gpus_per_node = units`,
//!   `placement.max_nodes = count`.
//! - `vendor: nvidia` → `gpus.vendor: nvidia`; no model entries = any NVIDIA model (Akash emits
//!   `vendor/nvidia/model/*`).
//! - Models without `ram` → `gpus.models` (bare words, [`super::glob::matches_model`]).
//! - One model with `ram: NGi` → `gpus.models: [m]`, `gpus.min_vram_gib: N`, and
//!   `gpus.per_model: [{model: m, vram_class_gib: N}]` (Akash's `ram` is an exact class, so
//!   a bigger card of the model is not taken: never widened).
//! - Several models with `ram` → `gpus.per_model` pairs only (`H100 80Gi or A100 40Gi`: an A100
//!   80GB does not match).
//! - `interface: sxm|pcie` → `gpus.form_factor` (every entry must say the same).
//! - `interconnect` → `gpus.interconnect_group`.
//!
//! Anything else is refused with the SDL field's path ([`SdlError`]). Pure: no I/O.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_norway::Value;

use super::spec::{
    FormFactor, GpuRequest, Image, Interconnect, PerModel, Placement, ResourcesPerGpu, Vendor,
};

/// Akash's reserved group name for `interconnect: []` (chain-sdk `InterconnectGroupAuto`).
pub const INTERCONNECT_GROUP_AUTO: &str = "auto";

/// The ensemble-spec fields an SDL determines, in the spec's field order. A fragment gives
/// `gpus` and `placement`; a whole SDL also the image, argv, environment and per-GPU host
/// resources. The payment terms (`limits`, `budget_ntx`, `deadline_ms`) never come from an SDL.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Imported {
    /// `image` (`services.<name>.image`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<Image>,
    /// `command` (`services.<name>.command` then `.args`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// `env` (`services.<name>.env`, `NAME=value` entries).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// `gpus`.
    pub gpus: GpuRequest,
    /// `placement`.
    pub placement: Placement,
    /// `resources_per_gpu` (the profile's cpu, memory and storage divided by `gpu.units`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources_per_gpu: Option<ResourcesPerGpu>,
    /// SDL fields that map to a spec field the user must still write, by SDL path with what to
    /// write (`profiles.placement.dcloud.pricing` → `limits.max_rate_ntx_per_gpu_hour`). Not part
    /// of the spec; `import-sdl` prints them on stderr.
    #[serde(skip)]
    pub to_complete: Vec<String>,
}

impl Imported {
    /// Just `gpus` and `placement` (what a fragment gives).
    pub fn gpus_only(gpus: GpuRequest, placement: Placement) -> Self {
        Self {
            image: None,
            command: Vec::new(),
            env: BTreeMap::new(),
            gpus,
            placement,
            resources_per_gpu: None,
            to_complete: Vec::new(),
        }
    }
}

/// Why an SDL cannot be imported. Every variant names the SDL field as a path
/// (`gpu.attributes.vendor.nvidia[0].interface`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SdlError {
    /// Not YAML.
    #[error("not YAML: {0}")]
    Yaml(#[from] serde_norway::Error),
    /// A field that is wrong, unknown, or cannot be carried into an ensemble spec.
    #[error("{field}: {rule}")]
    Field {
        /// The SDL path.
        field: String,
        /// What is wrong with it.
        rule: SdlRule,
    },
}

impl SdlError {
    /// The SDL field named (`.` for the document).
    pub fn field(&self) -> &str {
        match self {
            Self::Yaml(_) => ".",
            Self::Field { field, .. } => field,
        }
    }
}

/// The rule an SDL field broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SdlRule {
    /// Akash SDL v2 has no such field here.
    #[error("unsupported field (not in Akash SDL v2 here)")]
    Unknown,
    /// A field that must be present.
    #[error("required when gpu.units > 0")]
    RequiredWithUnits,
    /// A field that must be present.
    #[error("required")]
    Required,
    /// `interface` other than `pcie` or `sxm` (Akash's `gpuInterface`).
    #[error("'{0}' is not pcie|sxm")]
    NotPcieOrSxm(String),
    /// Wrong YAML type.
    #[error("expected {0}")]
    Type(&'static str),
    /// A memory quantity this import does not read (only whole `Gi`).
    #[error("`{0}` is not a whole number of Gi (e.g. 80Gi)")]
    Quantity(String),
    /// Valid SDL whose meaning an ensemble spec cannot hold.
    #[error("cannot be carried into an ensemble spec: {0}")]
    CannotCarry(&'static str),
}

pub(super) fn refuse<T>(field: impl Into<String>, rule: SdlRule) -> Result<T, SdlError> {
    Err(SdlError::Field {
        field: field.into(),
        rule,
    })
}

/// The mapping at `field`, or a type error naming it.
pub(super) fn mapping<'a>(
    v: &'a Value,
    field: &str,
) -> Result<&'a serde_norway::Mapping, SdlError> {
    match v {
        Value::Mapping(m) => Ok(m),
        _ => refuse(field, SdlRule::Type("a mapping")),
    }
}

/// Keys of `m` as strings, refusing any outside `allowed` by its path under `at`.
pub(super) fn entries<'a>(
    m: &'a serde_norway::Mapping,
    at: &str,
    allowed: &[&str],
) -> Result<Vec<(&'a str, &'a Value)>, SdlError> {
    let mut out = Vec::new();
    for (k, v) in m {
        let key = k.as_str().unwrap_or("?");
        let path = if at.is_empty() {
            key.to_string()
        } else {
            format!("{at}.{key}")
        };
        if !allowed.contains(&key) {
            return refuse(path, SdlRule::Unknown);
        }
        out.push((key, v));
    }
    Ok(out)
}

pub(super) fn get<'a>(e: &[(&str, &'a Value)], key: &str) -> Option<&'a Value> {
    e.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// A non-negative integer, written as a number or a string (`units: "2"`).
pub(super) fn count(v: &Value, field: &str) -> Result<u32, SdlError> {
    let n = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    match n.and_then(|n| u32::try_from(n).ok()) {
        Some(n) => Ok(n),
        None => refuse(field, SdlRule::Type("a non-negative integer")),
    }
}

/// `NGi` → N.
fn gib(v: &Value, field: &str) -> Result<u32, SdlError> {
    let Value::String(s) = v else {
        return refuse(field, SdlRule::Type("a quantity such as 80Gi"));
    };
    match s.trim().strip_suffix("Gi").and_then(|n| n.parse().ok()) {
        Some(n) if n > 0 => Ok(n),
        _ => refuse(field, SdlRule::Quantity(s.clone())),
    }
}

/// One `vendor.nvidia[]` entry.
struct NvidiaModel {
    model: String,
    ram_gib: Option<u32>,
    interface: Option<FormFactor>,
}

fn nvidia_model(v: &Value, at: &str) -> Result<NvidiaModel, SdlError> {
    let e = entries(mapping(v, at)?, at, &["model", "ram", "interface"])?;
    let model = match get(&e, "model") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        Some(_) => return refuse(format!("{at}.model"), SdlRule::Type("a model name")),
        None => return refuse(format!("{at}.model"), SdlRule::Required),
    };
    let ram_gib = get(&e, "ram")
        .map(|r| gib(r, &format!("{at}.ram")))
        .transpose()?;
    let interface = match get(&e, "interface") {
        None => None,
        Some(Value::String(s)) if s == "sxm" => Some(FormFactor::Sxm),
        Some(Value::String(s)) if s == "pcie" => Some(FormFactor::Pcie),
        Some(Value::String(s)) => {
            return refuse(format!("{at}.interface"), SdlRule::NotPcieOrSxm(s.clone()));
        }
        Some(_) => return refuse(format!("{at}.interface"), SdlRule::Type("pcie or sxm")),
    };
    Ok(NvidiaModel {
        model,
        ram_gib,
        interface,
    })
}

/// `<gpu>.attributes.interconnect` at path `at`: `[]` → `auto`, `{group: NAME}` → NAME.
fn interconnect_group(v: &Value, at: &str) -> Result<String, SdlError> {
    match v {
        Value::Sequence(s) if s.is_empty() => Ok(INTERCONNECT_GROUP_AUTO.to_string()),
        Value::Mapping(m) => {
            let e = entries(m, at, &["group"])?;
            match get(&e, "group") {
                Some(Value::String(g)) if g == INTERCONNECT_GROUP_AUTO => refuse(
                    format!("{at}.group"),
                    SdlRule::CannotCarry("`auto` is reserved for `interconnect: []`"),
                ),
                Some(Value::String(g)) if !g.trim().is_empty() => Ok(g.clone()),
                _ => refuse(format!("{at}.group"), SdlRule::Required),
            }
        }
        _ => refuse(at, SdlRule::Type("`[]` or `{group: <name>}`")),
    }
}

/// Imports an SDL: a GPU fragment (`{count, gpu}`) or a whole SDL v2 document (`version`,
/// `services`, `profiles`, `deployment`), see the module docs.
///
/// # Errors
/// [`SdlError`] naming the SDL field that is invalid or cannot be carried.
pub fn import(text: &str) -> Result<Imported, SdlError> {
    let doc: Value = serde_norway::from_str(text)?;
    let top = mapping(&doc, ".")?;
    if top.contains_key("services") || top.contains_key("version") {
        super::sdl_full::import_document(top)
    } else {
        import_fragment_value(top)
    }
}

/// Imports one SDL GPU fragment (`{count, gpu}`, see the module docs).
///
/// # Errors
/// [`SdlError`] naming the SDL field that is invalid or cannot be carried.
pub fn import_fragment(text: &str) -> Result<Imported, SdlError> {
    let doc: Value = serde_norway::from_str(text)?;
    import_fragment_value(mapping(&doc, ".")?)
}

fn import_fragment_value(doc: &serde_norway::Mapping) -> Result<Imported, SdlError> {
    let top = entries(doc, "", &["id", "count", "gpu"])?;
    let replicas = get(&top, "count")
        .map(|c| count(c, "count"))
        .transpose()?
        .unwrap_or(1);
    let Some(gpu) = get(&top, "gpu") else {
        return refuse("gpu", SdlRule::Required);
    };
    let (gpus, placement) = gpu_block(gpu, "gpu", replicas, "count")?;
    Ok(Imported::gpus_only(gpus, placement))
}

/// The `gpus` and `placement` of a `resources.gpu` block at path `at`, run as `replicas`
/// replicas (the deployment count at path `count_at`).
pub(super) fn gpu_block(
    gpu: &Value,
    at: &str,
    replicas: u32,
    count_at: &str,
) -> Result<(GpuRequest, Placement), SdlError> {
    if replicas == 0 {
        return refuse(count_at, SdlRule::CannotCarry("0 replicas run nothing"));
    }
    let gpu = entries(mapping(gpu, at)?, at, &["units", "attributes"])?;
    let units = match get(&gpu, "units") {
        Some(u) => count(u, &format!("{at}.units"))?,
        None => return refuse(format!("{at}.units"), SdlRule::Required),
    };
    let attributes = get(&gpu, "attributes");
    if units == 0 {
        return refuse(
            format!("{at}.units"),
            SdlRule::CannotCarry("an ensemble needs at least one GPU"),
        );
    }
    let at_attr = format!("{at}.attributes");
    let Some(attributes) = attributes else {
        return refuse(at_attr, SdlRule::RequiredWithUnits);
    };
    let attrs = entries(
        mapping(attributes, &at_attr)?,
        &at_attr,
        &["vendor", "interconnect"],
    )?;
    let at_vendor = format!("{at_attr}.vendor");
    let Some(vendor) = get(&attrs, "vendor") else {
        return refuse(at_vendor, SdlRule::Required);
    };
    let vendors = entries(mapping(vendor, &at_vendor)?, &at_vendor, &["nvidia"])?;
    let Some(nvidia) = get(&vendors, "nvidia") else {
        return refuse(at_vendor, SdlRule::Required);
    };
    let at_nvidia = format!("{at_vendor}.nvidia");
    let models: Vec<NvidiaModel> = match nvidia {
        Value::Null => Vec::new(),
        Value::Sequence(list) => list
            .iter()
            .enumerate()
            .map(|(i, m)| nvidia_model(m, &format!("{at_nvidia}[{i}]")))
            .collect::<Result<_, _>>()?,
        _ => return refuse(at_nvidia, SdlRule::Type("a list of models")),
    };
    let form_factor = models.first().and_then(|m| m.interface);
    if let Some(i) = models.iter().position(|m| m.interface != form_factor) {
        return refuse(
            format!("{at_nvidia}[{i}].interface"),
            SdlRule::CannotCarry("gpus.form_factor is one for all models; this entry differs"),
        );
    }
    let interconnect_group = get(&attrs, "interconnect")
        .map(|v| interconnect_group(v, &format!("{at_attr}.interconnect")))
        .transpose()?;
    let any_ram = models.iter().any(|m| m.ram_gib.is_some());
    let (names, min_vram_gib, per_model) = match models.as_slice() {
        [one] => (
            vec![one.model.clone()],
            one.ram_gib.unwrap_or(0),
            one.ram_gib
                .map(|c| {
                    vec![PerModel {
                        model: one.model.clone(),
                        vram_class_gib: Some(c),
                    }]
                })
                .unwrap_or_default(),
        ),
        many if any_ram => (
            Vec::new(),
            0,
            many.iter()
                .map(|m| PerModel {
                    model: m.model.clone(),
                    vram_class_gib: m.ram_gib,
                })
                .collect(),
        ),
        many => (
            many.iter().map(|m| m.model.clone()).collect(),
            0,
            Vec::new(),
        ),
    };
    let Some(total) = units.checked_mul(replicas) else {
        return refuse(count_at, SdlRule::Type("a count whose GPUs fit in 32 bits"));
    };
    Ok((
        GpuRequest {
            count: total,
            vendor: Vendor::Nvidia,
            min_vram_gib,
            min_compute_capability: None,
            rocm_arch: Vec::new(),
            models: names,
            per_model,
            interconnect: Interconnect::Any,
            form_factor,
            interconnect_group,
        },
        Placement {
            min_gpus_per_node: units,
            max_gpus_per_node: None,
            max_nodes: Some(replicas),
            max_rtt_ms: None,
            min_bandwidth_mbps: None,
            groups: None,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(text: &str) -> String {
        import_fragment(text)
            .expect_err("refused")
            .field()
            .to_string()
    }

    #[test]
    fn units_and_count_become_count_min_per_node_and_max_nodes() {
        let i = import_fragment(
            "count: 3\ngpu:\n  units: 2\n  attributes:\n    vendor:\n      nvidia:\n        - model: a100\n",
        )
        .expect("imports");
        assert_eq!(i.gpus.count, 6);
        assert_eq!(i.gpus.models, vec!["a100".to_string()]);
        assert_eq!(
            (i.placement.min_gpus_per_node, i.placement.max_nodes),
            (2, Some(3))
        );
        assert!(i.gpus.per_model.is_empty());
    }

    #[test]
    fn refusals_name_the_sdl_field() {
        let base = "gpu:\n  units: 1\n  attributes:\n    vendor:\n      nvidia:\n";
        assert_eq!(field_of("gpu:\n  units: 1\n  size: 2\n"), "gpu.size");
        assert_eq!(
            field_of(&format!(
                "{base}        - model: a100\n          ram: 80GB\n"
            )),
            "gpu.attributes.vendor.nvidia[0].ram"
        );
        assert_eq!(
            field_of(&format!("{base}        - model: a100\n          foo: 1\n")),
            "gpu.attributes.vendor.nvidia[0].foo"
        );
        assert_eq!(
            field_of(&format!(
                "{base}        - model: a100\n          interface: sxm\n        - model: h100\n"
            )),
            "gpu.attributes.vendor.nvidia[1].interface"
        );
        assert_eq!(
            field_of("gpu:\n  units: 1\n  attributes:\n    vendor:\n      amd:\n"),
            "gpu.attributes.vendor.amd"
        );
        assert_eq!(
            field_of(
                "gpu:\n  units: 1\n  attributes:\n    vendor: {nvidia: }\n    interconnect: true\n"
            ),
            "gpu.attributes.interconnect"
        );
        assert_eq!(
            field_of(
                "gpu:\n  units: 1\n  attributes:\n    vendor: {nvidia: }\n    interconnect: {group: auto}\n"
            ),
            "gpu.attributes.interconnect.group"
        );
        assert_eq!(field_of("gpu:\n  units: 0\n"), "gpu.units");
        assert_eq!(field_of("count: 1\n"), "gpu");
    }

    #[test]
    fn implicit_interconnect_is_the_auto_group() {
        let i = import_fragment(
            "gpu:\n  units: 1\n  attributes:\n    vendor: {nvidia: }\n    interconnect: []\n",
        )
        .expect("imports");
        assert_eq!(i.gpus.interconnect_group.as_deref(), Some("auto"));
        assert!(i.gpus.models.is_empty(), "any NVIDIA model");
    }
}
