//! A whole Akash SDL v2 document (`version`, `services`, `profiles`, `deployment`) → ensemble
//! spec fields; the GPU block goes through [`super::sdl::gpu_block`].
//!
//! Carried: the one service's `image` (`image.local`), `command` + `args` (the argv), `env`
//! (`NAME=value`), its deployment's `count` and compute profile (`resources.gpu`, and `cpu.units`,
//! `memory.size`, `storage` sizes divided by `gpu.units` into `resources_per_gpu`). The
//! placement profile's `pricing` (uakt per block) has no NTX equivalent: it is listed in
//! [`super::sdl::Imported::to_complete`] as `limits.max_rate_ntx_per_gpu_hour` to write.
//! Refused by name: a second service (an ensemble runs one image on every rank), `expose`
//! (ranks talk over the overlay; nothing is exposed to the internet), `params`, `credentials`,
//! `dependencies`, persistent storage attributes, `endpoints`, and the placement profile's
//! `attributes` and `signedBy` (Akash provider filters with no ganglion counterpart).

use std::collections::BTreeMap;

use serde_norway::{Mapping, Value};

use super::sdl::{Imported, SdlError, SdlRule, count, entries, get, gpu_block, mapping, refuse};
use super::spec::{Image, ResourcesPerGpu};

/// Bytes of a Kubernetes quantity (`64Gi`, `512Mi`, `1G`, `100000`), as Akash reads
/// `memory.size` and `storage.size`.
fn bytes(v: &Value, field: &str) -> Result<f64, SdlError> {
    let text = match v {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return refuse(field, SdlRule::Type("a quantity such as 64Gi")),
    };
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    let scale: f64 = match unit {
        "" => 1.0,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        _ => return refuse(field, SdlRule::Quantity(text.clone())),
    };
    match num.parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 0.0 => Ok(n * scale),
        _ => refuse(field, SdlRule::Quantity(text.clone())),
    }
}

/// CPU cores of `cpu.units` (`8`, `0.5`, `"500m"`).
fn cores(v: &Value, field: &str) -> Result<f64, SdlError> {
    let parsed = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.trim().strip_suffix('m') {
            Some(milli) => milli.parse::<f64>().ok().map(|m| m / 1000.0),
            None => s.trim().parse().ok(),
        },
        _ => None,
    };
    match parsed {
        Some(c) if c.is_finite() && c >= 0.0 => Ok(c),
        _ => refuse(field, SdlRule::Type("CPU units such as 8, 0.5 or 500m")),
    }
}

/// A list of strings at `field` (`command`, `args`).
fn strings(v: &Value, field: &str) -> Result<Vec<String>, SdlError> {
    let Value::Sequence(list) = v else {
        return refuse(field, SdlRule::Type("a list of strings"));
    };
    list.iter()
        .enumerate()
        .map(|(i, x)| match x {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            _ => refuse(format!("{field}[{i}]"), SdlRule::Type("a string")),
        })
        .collect()
}

/// The only entry of a mapping, or a refusal naming `field`.
fn single<'a>(
    m: &'a Mapping,
    field: &str,
    why: &'static str,
) -> Result<(&'a str, &'a Value), SdlError> {
    let mut it = m.iter();
    match (it.next(), it.next()) {
        (Some((k, v)), None) => match k.as_str() {
            Some(k) => Ok((k, v)),
            None => refuse(field, SdlRule::Type("string keys")),
        },
        (None, _) => refuse(field, SdlRule::Required),
        (Some(_), Some(_)) => refuse(field, SdlRule::CannotCarry(why)),
    }
}

/// Imports a whole SDL document (module docs).
pub(super) fn import_document(doc: &Mapping) -> Result<Imported, SdlError> {
    let top = entries(
        doc,
        "",
        &["version", "services", "profiles", "deployment", "endpoints"],
    )?;
    match get(&top, "version") {
        Some(Value::String(v)) if v == "2.0" || v == "2.1" => {}
        Some(_) => return refuse("version", SdlRule::Type("\"2.0\" or \"2.1\"")),
        None => return refuse("version", SdlRule::Required),
    }
    if get(&top, "endpoints").is_some() {
        return refuse(
            "endpoints",
            SdlRule::CannotCarry("leased IPs: ranks are reached over the overlay"),
        );
    }
    let services = mapping(get(&top, "services").unwrap_or(&Value::Null), "services")?;
    let (name, service) = single(
        services,
        "services",
        "an ensemble runs one image on every rank: import one service per spec",
    )?;
    let at = format!("services.{name}");
    let svc = entries(
        mapping(service, &at)?,
        &at,
        &[
            "image",
            "command",
            "args",
            "env",
            "expose",
            "params",
            "credentials",
            "dependencies",
        ],
    )?;
    for (key, why) in [
        (
            "expose",
            "ranks talk over the overlay; no port is exposed to the internet",
        ),
        (
            "params",
            "persistent volumes and service parameters have no spec field",
        ),
        (
            "credentials",
            "private registries: use an image archive by CID",
        ),
        ("dependencies", "one service per spec"),
    ] {
        if get(&svc, key).is_some() {
            return refuse(format!("{at}.{key}"), SdlRule::CannotCarry(why));
        }
    }
    let image = match get(&svc, "image") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        Some(_) => return refuse(format!("{at}.image"), SdlRule::Type("an image name")),
        None => return refuse(format!("{at}.image"), SdlRule::Required),
    };
    let mut command = match get(&svc, "command") {
        Some(c) => strings(c, &format!("{at}.command"))?,
        None => {
            return refuse(
                format!("{at}.command"),
                SdlRule::CannotCarry(
                    "the spec needs the argv and the image's own entrypoint is not known here",
                ),
            );
        }
    };
    if let Some(a) = get(&svc, "args") {
        command.extend(strings(a, &format!("{at}.args"))?);
    }
    let mut env = BTreeMap::new();
    if let Some(e) = get(&svc, "env") {
        for (i, kv) in strings(e, &format!("{at}.env"))?.into_iter().enumerate() {
            match kv.split_once('=') {
                Some((k, v)) if !k.is_empty() => {
                    env.insert(k.to_string(), v.to_string());
                }
                _ => return refuse(format!("{at}.env[{i}]"), SdlRule::Type("NAME=value")),
            }
        }
    }
    // deployment.<service>.<placement>: {profile, count}
    let deployment = mapping(
        get(&top, "deployment").unwrap_or(&Value::Null),
        "deployment",
    )?;
    let at_dep = format!("deployment.{name}");
    let Some(dep) = deployment.get(name) else {
        return refuse(at_dep, SdlRule::Required);
    };
    let (placement_name, dep) = single(
        mapping(dep, &at_dep)?,
        &at_dep,
        "one placement per spec: the matcher chooses the providers",
    )?;
    let at_dep = format!("{at_dep}.{placement_name}");
    let dep = entries(mapping(dep, &at_dep)?, &at_dep, &["profile", "count"])?;
    let profile = match get(&dep, "profile") {
        Some(Value::String(p)) => p.clone(),
        _ => return refuse(format!("{at_dep}.profile"), SdlRule::Required),
    };
    let count_at = format!("{at_dep}.count");
    let replicas = match get(&dep, "count") {
        Some(c) => count(c, &count_at)?,
        None => 1,
    };
    let profiles = mapping(get(&top, "profiles").unwrap_or(&Value::Null), "profiles")?;
    let profiles = entries(profiles, "profiles", &["compute", "placement"])?;
    let mut to_complete = Vec::new();
    if let Some(pl) = get(&profiles, "placement") {
        let at_pl = format!("profiles.placement.{placement_name}");
        if let Some(p) = mapping(pl, "profiles.placement")?.get(placement_name) {
            let p = entries(
                mapping(p, &at_pl)?,
                &at_pl,
                &["attributes", "signedBy", "pricing"],
            )?;
            for key in ["attributes", "signedBy"] {
                if get(&p, key).is_some() {
                    return refuse(
                        format!("{at_pl}.{key}"),
                        SdlRule::CannotCarry("Akash provider filters have no ganglion counterpart"),
                    );
                }
            }
            if get(&p, "pricing").is_some() {
                to_complete.push(format!(
                    "{at_pl}.pricing: uakt per block has no NTX rate; write limits.max_rate_ntx_per_gpu_hour"
                ));
            }
        }
    }
    let at_res = format!("profiles.compute.{profile}.resources");
    let compute = mapping(
        get(&profiles, "compute").unwrap_or(&Value::Null),
        "profiles.compute",
    )?;
    let Some(prof) = compute.get(profile.as_str()) else {
        return refuse(format!("profiles.compute.{profile}"), SdlRule::Required);
    };
    let at_prof = format!("profiles.compute.{profile}");
    let prof = entries(mapping(prof, &at_prof)?, &at_prof, &["resources"])?;
    let res = entries(
        mapping(get(&prof, "resources").unwrap_or(&Value::Null), &at_res)?,
        &at_res,
        &["cpu", "memory", "storage", "gpu"],
    )?;
    let Some(gpu) = get(&res, "gpu") else {
        return refuse(
            format!("{at_res}.gpu"),
            SdlRule::CannotCarry("an ensemble needs at least one GPU"),
        );
    };
    let (gpus, placement) = gpu_block(gpu, &format!("{at_res}.gpu"), replicas, &count_at)?;
    let per = f64::from(placement.min_gpus_per_node);
    let mut r = ResourcesPerGpu::default();
    if let Some(cpu) = get(&res, "cpu") {
        let at_cpu = format!("{at_res}.cpu");
        let cpu = entries(mapping(cpu, &at_cpu)?, &at_cpu, &["units"])?;
        if let Some(u) = get(&cpu, "units") {
            r.cpu_cores = cores(u, &format!("{at_cpu}.units"))? / per;
        }
    }
    if let Some(mem) = get(&res, "memory") {
        let at_mem = format!("{at_res}.memory");
        let mem = entries(mapping(mem, &at_mem)?, &at_mem, &["size"])?;
        if let Some(sz) = get(&mem, "size") {
            r.mem_gib = bytes(sz, &format!("{at_mem}.size"))? / f64::from(1u32 << 30) / per;
        }
    }
    if let Some(st) = get(&res, "storage") {
        let at_st = format!("{at_res}.storage");
        let volumes: Vec<(String, &Value)> = match st {
            Value::Sequence(list) => list
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("{at_st}[{i}]"), v))
                .collect(),
            other => vec![(at_st.clone(), other)],
        };
        let mut total = 0.0;
        for (at_v, v) in volumes {
            let vol = entries(mapping(v, &at_v)?, &at_v, &["name", "size", "attributes"])?;
            if get(&vol, "attributes").is_some() {
                return refuse(
                    format!("{at_v}.attributes"),
                    SdlRule::CannotCarry("persistent storage: outputs go to /outputs and IPFS"),
                );
            }
            if let Some(sz) = get(&vol, "size") {
                total += bytes(sz, &format!("{at_v}.size"))?;
            }
        }
        r.disk_gib = total / f64::from(1u32 << 30) / per;
    }
    Ok(Imported {
        image: Some(Image {
            local: Some(image),
            archive: None,
        }),
        command,
        env,
        gpus,
        placement,
        resources_per_gpu: (r != ResourcesPerGpu::default()).then_some(r),
        to_complete,
    })
}

#[cfg(test)]
mod tests {
    use super::super::sdl::import;

    const SDL: &str = r#"
version: "2.0"
services:
  train:
    image: pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime
    command: ["torchrun"]
    args: ["--nproc-per-node=2", "train.py"]
    env: ["EPOCHS=3"]
profiles:
  compute:
    train:
      resources:
        cpu: { units: 16 }
        memory: { size: 128Gi }
        storage: { size: 200Gi }
        gpu:
          units: 2
          attributes:
            vendor:
              nvidia:
                - model: h100
                  ram: 80Gi
  placement:
    dcloud:
      pricing:
        train: { denom: uakt, amount: 100000 }
deployment:
  train:
    dcloud: { profile: train, count: 2 }
"#;

    #[test]
    fn a_whole_sdl_gives_image_argv_env_gpus_and_per_gpu_resources() {
        let i = import(SDL).expect("imports");
        assert_eq!(
            i.image.and_then(|im| im.local).as_deref(),
            Some("pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime")
        );
        assert_eq!(i.command, ["torchrun", "--nproc-per-node=2", "train.py"]);
        assert_eq!(i.env.get("EPOCHS").map(String::as_str), Some("3"));
        assert_eq!(i.gpus.count, 4);
        assert_eq!(i.gpus.min_vram_gib, 80);
        assert_eq!(
            (i.placement.min_gpus_per_node, i.placement.max_nodes),
            (2, Some(2))
        );
        let r = i.resources_per_gpu.expect("resources");
        assert_eq!((r.cpu_cores, r.mem_gib, r.disk_gib), (8.0, 64.0, 100.0));
        assert_eq!(i.to_complete.len(), 1);
        assert!(i.to_complete[0].starts_with("profiles.placement.dcloud.pricing"));
    }

    #[test]
    fn what_cannot_be_carried_is_refused_by_name() {
        let field = |text: &str| import(text).expect_err("refused").field().to_string();
        let exposed = SDL.replace(
            "    env: [\"EPOCHS=3\"]\n",
            "    env: [\"EPOCHS=3\"]\n    expose:\n      - port: 80\n",
        );
        assert_eq!(field(&exposed), "services.train.expose");
        let no_command = SDL.replace("    command: [\"torchrun\"]\n", "");
        assert_eq!(field(&no_command), "services.train.command");
        let two = SDL.replace(
            "services:\n",
            "services:\n  web:\n    image: nginx\n    command: [nginx]\n",
        );
        assert_eq!(field(&two), "services");
        let bad_ram = SDL.replace("ram: 80Gi", "ram: 80GB");
        assert_eq!(
            field(&bad_ram),
            "profiles.compute.train.resources.gpu.attributes.vendor.nvidia[0].ram"
        );
        let signed = SDL.replace(
            "      pricing:\n",
            "      signedBy: { anyOf: [akash1xyz] }\n      pricing:\n",
        );
        assert_eq!(field(&signed), "profiles.placement.dcloud.signedBy");
        let zero = SDL.replace("count: 2 }", "count: 0 }");
        assert_eq!(field(&zero), "deployment.train.dcloud.count");
    }
}
