//! [`DockerExecutor`]: the [`Executor`] over the Docker Engine (bollard).
//!
//! `run`: job table record (never twice) → GPU runtime check → image → job network → per rank
//! dirs + inputs → create every container → start every container ("all running") →
//! supervise: logs streamed to files, stats sampled, wait with the wall-clock limit (first
//! failing rank or the limit kills the rest) → inspect (exit, OOM, GPU-seconds) → pin logs
//! and outputs (CID, CAR, piece CID) → remove containers, network, dirs → record.
//!
//! `recover`: for each unfinished job in the table, the labelled containers are adopted
//! (still running: supervised to the end, also when the crash came before `Running` was
//! recorded) or collected (exited). A job none of whose containers ever started (the crash fell
//! in its set-up) has its set-up undone and is forgotten, so its dispatcher runs it again: it
//! never ran, so that is its first start. Failed cleanups are retried. No container is ever
//! started twice.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bollard::Docker;
use bollard::errors::Error as DockerError;
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, KillContainerOptionsBuilder, ListContainersOptionsBuilder,
    LogsOptionsBuilder, RemoveContainerOptionsBuilder, StatsOptionsBuilder,
    WaitContainerOptionsBuilder,
};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use ganglion_storage::blockstore::Blockstore;
use ganglion_storage::pin::Embedded;
use tokio::io::AsyncWriteExt;
use tokio::task::JoinSet;

use super::artifacts::{self, JobDirs};
use super::engine::DockerEngine;
use super::error::{ExecError, FailureReason};
use super::image::{self, ImageRecord};
use super::labels;
use super::network::{ClusterNetwork, DockerBridge};
use super::plan::{JobPlan, ResourceDefaults, RunId};
use super::rendezvous::rank_env;
use super::report::{JobReport, Outcome, RankReport, Timings, Usage};
use super::sandbox::{AmdGroups, ContainerSpec, Mounts, container_body};
use super::state::{JobRecord, JobTable, Phase};
use super::{Executor, LogTail, MAX_LOG_TAIL_BYTES};

/// Executor settings.
#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// Job dirs (`jobs/<job>/…`) and the job table (`executor.sled`) live here. Must be on the
    /// engine's host: `/inputs` and `/outputs` are bind mounts from it.
    pub work_dir: PathBuf,
    /// Resources where the spec says 0.
    pub defaults: ResourceDefaults,
    /// How long to wait for log streams to drain after the containers exit.
    pub log_drain: Duration,
    /// How often `/outputs` sizes are checked while the job runs (a job over its allowance
    /// is stopped then, not only at the end).
    pub outputs_check: Duration,
}

impl ExecutorConfig {
    /// Defaults under `work_dir`.
    pub fn new(work_dir: impl Into<PathBuf>) -> Self {
        Self {
            work_dir: work_dir.into(),
            defaults: ResourceDefaults::default(),
            log_drain: Duration::from_secs(5),
            outputs_check: Duration::from_secs(1),
        }
    }
}

/// The Docker executor. `N` gives containers their network ([`DockerBridge`] on one host).
pub struct DockerExecutor<S, N = DockerBridge> {
    engine: DockerEngine,
    network: N,
    pinner: Embedded<S>,
    table: JobTable,
    config: ExecutorConfig,
    /// Jobs supervised by a task of this process right now: `recover` leaves them alone, so a
    /// job is never supervised twice (jobs themselves run concurrently).
    active: Arc<std::sync::Mutex<HashSet<RunId>>>,
    /// Jobs the node stopped ([`Executor::stop`]), and why: their supervisor records the end
    /// as [`FailureReason::Stopped`].
    stops: Arc<std::sync::Mutex<HashMap<RunId, String>>>,
}

impl<S: Blockstore + 'static> DockerExecutor<S, DockerBridge> {
    /// An executor on `engine` with one internal bridge network per job, pinning into `pinner`,
    /// its job table under `config.work_dir`.
    ///
    /// # Errors
    /// [`ExecError::State`] when the job table cannot be opened; I/O for the work dir.
    pub fn new(
        engine: DockerEngine,
        pinner: Embedded<S>,
        config: ExecutorConfig,
    ) -> Result<Self, ExecError> {
        let network = DockerBridge::new(engine.docker.clone());
        Self::with_network(engine, network, pinner, config)
    }
}

impl<S: Blockstore + 'static, N: ClusterNetwork> DockerExecutor<S, N> {
    /// An executor with another [`ClusterNetwork`] (the overlay).
    ///
    /// # Errors
    /// As [`DockerExecutor::new`].
    pub fn with_network(
        engine: DockerEngine,
        network: N,
        pinner: Embedded<S>,
        config: ExecutorConfig,
    ) -> Result<Self, ExecError> {
        std::fs::create_dir_all(&config.work_dir).map_err(ExecError::io(&config.work_dir))?;
        let table = JobTable::open(&config.work_dir.join("executor.sled"))?;
        Ok(Self {
            engine,
            network,
            pinner,
            table,
            config,
            active: Arc::default(),
            stops: Arc::default(),
        })
    }

    /// The engine.
    pub fn engine(&self) -> &DockerEngine {
        &self.engine
    }

    /// The pinner (the node's blockstore).
    pub fn pinner(&self) -> &Embedded<S> {
        &self.pinner
    }

    /// The job table.
    pub fn table(&self) -> &JobTable {
        &self.table
    }

    /// The job's dirs.
    pub fn dirs(&self, job: &RunId) -> JobDirs {
        JobDirs::new(&self.config.work_dir, job)
    }

    fn docker(&self) -> &Docker {
        &self.engine.docker
    }

    /// Accepts the job into the table, resolves its image, attaches its network, prepares its
    /// dirs and creates (and sandbox-checks) its containers without starting them. `run` goes
    /// on from here; the inspection tests stop here. Finish such a job with
    /// [`DockerExecutor::abandon`].
    ///
    /// Returns `Ok(Err(reason))` when the job was accepted but its setup failed (the record
    /// stays in phase `preparing` until `run` or `abandon` finishes it).
    ///
    /// # Errors
    /// As [`Executor::run`]: invalid plan, no GPU runtime, already known, job table.
    pub async fn create(
        &self,
        plan: &JobPlan,
    ) -> Result<Result<(JobRecord, ImageRecord, Timings), FailureReason>, ExecError> {
        plan.validate()?;
        self.engine.check_gpu_access(plan)?;
        let mut record = JobRecord::new(plan.clone());
        self.table.insert_new(&record)?;
        let t0 = Instant::now();
        let mut timings = Timings::default();
        let result = self.create_inner(plan, &mut record, &mut timings, t0).await;
        if let Ok(image) = &result {
            record.image = Some(image.clone());
            self.table.put(&record)?;
        }
        Ok(result.map(|image| (record, image, timings)))
    }

    async fn create_inner(
        &self,
        plan: &JobPlan,
        record: &mut JobRecord,
        timings: &mut Timings,
        t0: Instant,
    ) -> Result<ImageRecord, FailureReason> {
        let dirs = self.dirs(&plan.job);
        let image = image::ensure(
            self.docker(),
            &self.pinner,
            &plan.image,
            &dirs.root().join("scratch"),
        )
        .await?;
        timings.image_ms = ms(t0.elapsed());
        let setup = |e: ExecError| match e {
            ExecError::LinksDown {
                ref unreachable, ..
            } => FailureReason::NetworkUnformed {
                unreachable: unreachable.clone(),
                detail: e.to_string(),
            },
            e => FailureReason::Setup {
                detail: e.to_string(),
            },
        };
        let attachment = self
            .network
            .attach(&plan.job, plan.world.len() as u32, &plan.local)
            .await
            .map_err(setup)?;
        for rank in &plan.local {
            artifacts::prepare_rank(
                &dirs,
                *rank,
                &plan.inputs,
                &plan.outputs,
                &self.pinner,
                &plan.run_as,
            )
            .await?;
        }
        for &rank in &plan.local {
            let (Some(slot), Some(endpoint), Some(env)) = (
                plan.slot(rank),
                attachment.endpoints.get(&rank),
                rank_env(plan, rank, &attachment.hosts),
            ) else {
                return Err(FailureReason::Setup {
                    detail: format!("no slot/endpoint for node rank {rank}"),
                });
            };
            let render_nodes: Vec<&str> = slot
                .gpus
                .iter()
                .filter_map(|g| match g {
                    super::plan::GpuAttachment::Amd { render_node } => Some(render_node.as_str()),
                    _ => None,
                })
                .collect();
            let amd_groups = if render_nodes.is_empty() {
                AmdGroups::default()
            } else {
                AmdGroups::from_host(&render_nodes)
            };
            let inputs = dirs.inputs(rank);
            let outputs = dirs.outputs(rank);
            let body = container_body(&ContainerSpec {
                plan,
                slot,
                image: &image.id,
                resources: plan.resources(slot, &self.config.defaults),
                endpoint,
                rank_env: &env,
                mounts: Mounts {
                    inputs: &inputs,
                    outputs: &outputs,
                },
                amd_groups: &amd_groups,
            });
            let options = CreateContainerOptionsBuilder::default()
                .name(&container_name(&plan.job, rank))
                .build();
            let created = self
                .docker()
                .create_container(Some(options), body)
                .await
                .map_err(|e| engine_failure("create container", e))?;
            record.containers.push((rank, created.id.clone()));
            self.table.put(record).map_err(setup)?;
            let inspected = self
                .docker()
                .inspect_container(&created.id, None)
                .await
                .map_err(|e| engine_failure("inspect container", e))?;
            let bad = super::sandbox::violations(&inspected);
            if !bad.is_empty() {
                return Err(FailureReason::Setup {
                    detail: format!("the engine did not apply the sandbox: {}", bad.join("; ")),
                });
            }
        }
        timings.created_ms = ms(t0.elapsed());
        Ok(image)
    }

    async fn run_inner(&self, plan: JobPlan) -> Result<JobReport, ExecError> {
        let Some(_active) = Active::claim(&self.active, &plan.job) else {
            return Err(ExecError::AlreadyKnown {
                job: plan.job.to_string(),
                phase: "being supervised".into(),
            });
        };
        let t0 = Instant::now();
        let (mut record, image, mut timings) = match self.create(&plan).await? {
            Ok(created) => created,
            Err(reason) => {
                let mut record = self
                    .table
                    .get(&plan.job)?
                    .unwrap_or_else(|| JobRecord::new(plan.clone()));
                return self
                    .finish(
                        &mut record,
                        None,
                        vec![],
                        Some(reason),
                        Timings::default(),
                        t0,
                        false,
                    )
                    .await;
            }
        };
        // Start every container at once: the engine's start (namespaces, mounts, network
        // endpoint) dominates "all running", and the ranks wait for each other anyway.
        let starts = futures::future::join_all(
            record
                .containers
                .iter()
                .map(|(_, id)| self.docker().start_container(id, None)),
        )
        .await;
        for result in starts {
            if let Err(e) = result {
                let reason = engine_failure("start container", e);
                return self
                    .finish(
                        &mut record,
                        Some(image),
                        vec![],
                        Some(reason),
                        timings,
                        t0,
                        false,
                    )
                    .await;
            }
        }
        timings.all_running_ms = ms(t0.elapsed());
        record.phase = Phase::Running;
        record.started_at_unix_ms = Some(unix_ms());
        self.table.put(&record)?;
        self.supervise(record, Some(image), timings, t0, false)
            .await
    }

    /// Supervises started containers to the end and records the result.
    async fn supervise(
        &self,
        mut record: JobRecord,
        image: Option<ImageRecord>,
        mut timings: Timings,
        t0: Instant,
        adopted: bool,
    ) -> Result<JobReport, ExecError> {
        let plan = record.plan.clone();
        let dirs = self.dirs(&plan.job);
        let started = record.started_at_unix_ms.unwrap_or_else(unix_ms);
        let limit = Duration::from_secs(plan.max_duration_s);
        let elapsed = Duration::from_millis(unix_ms().saturating_sub(started));
        let deadline = tokio::time::Instant::now() + limit.saturating_sub(elapsed);

        // Logs and stats run beside the wait; dropping the set aborts them.
        let mut side = JoinSet::new();
        let usage: Arc<std::sync::Mutex<HashMap<u32, Usage>>> = Arc::default();
        let mut log_tasks = vec![];
        for (rank, id) in &record.containers {
            if let Err(e) = tokio::fs::create_dir_all(dirs.artifacts()).await {
                tracing::warn!(job = %plan.job, "artifacts dir: {e}");
            }
            log_tasks.push(side.spawn(follow_logs(
                self.docker().clone(),
                id.clone(),
                dirs.log(*rank),
            )));
            side.spawn(sample_stats(
                self.docker().clone(),
                id.clone(),
                *rank,
                Arc::clone(&usage),
            ));
        }

        let mut failure: Option<FailureReason> = None;
        let watched: Vec<(u32, PathBuf, u64)> = record
            .containers
            .iter()
            .filter_map(|(rank, _)| {
                let slot = plan.slot(*rank)?;
                let limit = plan.resources(slot, &self.config.defaults).outputs_bytes;
                Some((*rank, dirs.outputs(*rank), limit))
            })
            .collect();
        let over_limit = watch_outputs(watched, self.config.outputs_check);
        tokio::pin!(over_limit);
        let mut waits: FuturesUnordered<_> = record
            .containers
            .iter()
            .map(|(rank, id)| {
                let docker = self.docker().clone();
                let id = id.clone();
                let rank = *rank;
                async move { (rank, wait_exit(&docker, &id).await) }
            })
            .collect();
        loop {
            tokio::select! {
                next = waits.next() => match next {
                    None => break,
                    Some((_, Ok(0))) => {}
                    Some((rank, Ok(code))) => {
                        let stopped = self.stops.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&plan.job).cloned();
                        if failure.is_none() && stopped.is_none() {
                            tracing::info!(job = %plan.job, rank, code, "rank failed; stopping the job");
                            self.kill_all(&record).await;
                        }
                        failure.get_or_insert(match stopped {
                            Some(why) => FailureReason::Stopped { why },
                            None => FailureReason::NonZeroExit { node_rank: rank, exit_code: code },
                        });
                    }
                    Some((_, Err(e))) => {
                        failure = Some(engine_failure("wait container", e));
                        break;
                    }
                },
                reason = &mut over_limit, if failure.is_none() => {
                    tracing::info!(job = %plan.job, "{reason}; stopping the job");
                    self.kill_all(&record).await;
                    failure = Some(reason);
                }
                () = tokio::time::sleep_until(deadline) => {
                    self.kill_all(&record).await;
                    failure = Some(FailureReason::WallClockExceeded { limit_s: plan.max_duration_s });
                    // Collect the exits of the killed containers.
                    while let Some((_, r)) = waits.next().await {
                        if let Err(e) = r {
                            failure = Some(engine_failure("wait container", e));
                            break;
                        }
                    }
                    break;
                }
            }
        }
        drop(waits);
        timings.exited_ms = ms(t0.elapsed());
        // Logs end when the container stops; give them a moment, then stop everything.
        let drain = tokio::time::sleep(self.config.log_drain);
        tokio::pin!(drain);
        let mut pending_logs = log_tasks.len();
        while pending_logs > 0 {
            tokio::select! {
                joined = side.join_next() => match joined {
                    Some(_) => pending_logs = pending_logs.saturating_sub(1),
                    None => break,
                },
                () = &mut drain => break,
            }
        }
        side.abort_all();
        let usage = usage.lock().map(|u| u.clone()).unwrap_or_default();

        // Inspect: exit codes, OOM, engine times.
        let mut ranks = vec![];
        let engine_alive = !matches!(failure, Some(FailureReason::EngineUnavailable { .. }));
        if engine_alive {
            for (rank, id) in &record.containers {
                match self.docker().inspect_container(id, None).await {
                    Ok(info) => {
                        let state = info.state.unwrap_or_default();
                        let gpus = plan.slot(*rank).map_or(0, |s| s.gpus.len() as u32);
                        let run_seconds =
                            run_seconds(state.started_at.as_deref(), state.finished_at.as_deref());
                        let oom = state.oom_killed.unwrap_or(false);
                        if oom && !matches!(failure, Some(FailureReason::WallClockExceeded { .. }))
                        {
                            failure = Some(FailureReason::OutOfMemory { node_rank: *rank });
                        }
                        ranks.push(RankReport {
                            node_rank: *rank,
                            container_id: id.clone(),
                            exit_code: state.exit_code,
                            oom_killed: oom,
                            gpus,
                            run_seconds,
                            gpu_seconds: f64::from(gpus) * run_seconds,
                            usage: usage.get(rank).copied().unwrap_or_default(),
                            logs: None,
                            outputs: None,
                        });
                    }
                    Err(e) => {
                        failure = Some(engine_failure("inspect container", e));
                        break;
                    }
                }
            }
        }
        self.finish(&mut record, image, ranks, failure, timings, t0, adopted)
            .await
    }

    /// Collects artifacts, cleans up and writes the terminal record.
    #[allow(clippy::too_many_arguments)]
    async fn finish(
        &self,
        record: &mut JobRecord,
        image: Option<ImageRecord>,
        mut ranks: Vec<RankReport>,
        mut failure: Option<FailureReason>,
        mut timings: Timings,
        t0: Instant,
        adopted: bool,
    ) -> Result<JobReport, ExecError> {
        let plan = record.plan.clone();
        let dirs = self.dirs(&plan.job);
        for rank in &mut ranks {
            let log = dirs.log(rank.node_rank);
            if tokio::fs::try_exists(&log).await.unwrap_or(false) {
                match artifacts::pin_log(&self.pinner, &log).await {
                    Ok(a) => rank.logs = Some(a),
                    Err(e) => {
                        failure.get_or_insert(e);
                    }
                }
            }
            let outputs = dirs.outputs(rank.node_rank);
            let limit = plan
                .slot(rank.node_rank)
                .map(|s| plan.resources(s, &self.config.defaults).outputs_bytes)
                .unwrap_or(0);
            match artifacts::dir_bytes(&outputs) {
                Ok(bytes) if bytes > limit => {
                    failure.get_or_insert(FailureReason::OutputsTooLarge {
                        node_rank: rank.node_rank,
                        bytes,
                        limit_bytes: limit,
                    });
                }
                Ok(_) => {}
                Err(e) => {
                    failure.get_or_insert(FailureReason::Storage {
                        detail: format!("{}: {e}", outputs.display()),
                    });
                }
            }
        }
        if failure.is_none() {
            for rank in &mut ranks {
                let outputs = dirs.outputs(rank.node_rank);
                match artifacts::pin_outputs(&self.pinner, &outputs, &dirs.car(rank.node_rank))
                    .await
                {
                    Ok(a) => rank.outputs = Some(a),
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
        }
        timings.collected_ms = ms(t0.elapsed());
        record.cleaned = self.cleanup(record).await;
        timings.cleaned_ms = ms(t0.elapsed());
        let outcome = match failure {
            None => Outcome::Succeeded,
            Some(reason) => Outcome::Failed { reason },
        };
        record.phase = if matches!(outcome, Outcome::Succeeded) {
            Phase::Succeeded
        } else {
            Phase::Failed
        };
        let report = JobReport {
            job: plan.job.clone(),
            outcome,
            image,
            ranks,
            timings,
            adopted,
        };
        record.report = Some(report.clone());
        self.table.put(record)?;
        // A copy beside the artifacts for people and tools (the table is the durable one).
        if let Ok(json) = serde_json::to_vec_pretty(&report)
            && let Err(e) = tokio::fs::write(dirs.report(), json).await
        {
            tracing::debug!(job = %plan.job, error = %e, "report.json not written");
        }
        Ok(report)
    }

    /// Gives up a job set up by [`DockerExecutor::create`] without starting it: removes what
    /// it made and records it as failed ([`FailureReason::Interrupted`]).
    ///
    /// # Errors
    /// Job table failures; [`ExecError::InvalidPlan`] for an unknown job.
    pub async fn abandon(&self, job: &RunId) -> Result<JobReport, ExecError> {
        let mut record = self
            .table
            .get(job)?
            .ok_or_else(|| ExecError::InvalidPlan(format!("unknown job {job}")))?;
        self.finish(
            &mut record,
            None,
            vec![],
            Some(FailureReason::Interrupted),
            Timings::default(),
            Instant::now(),
            false,
        )
        .await
    }

    async fn kill_all(&self, record: &JobRecord) {
        for (_, id) in &record.containers {
            let options = KillContainerOptionsBuilder::default()
                .signal("SIGKILL")
                .build();
            // Already exited is fine.
            let _ = self.docker().kill_container(id, Some(options)).await;
        }
    }

    /// Removes the job's containers (by label, so also ones not yet in the record), network
    /// and per-rank dirs. Returns whether everything went.
    async fn cleanup(&self, record: &JobRecord) -> bool {
        let job = &record.plan.job;
        let mut ok = true;
        match self.job_containers(job).await {
            Ok(ids) => {
                for id in ids {
                    let options = RemoveContainerOptionsBuilder::default()
                        .force(true)
                        .v(true)
                        .build();
                    match self.docker().remove_container(&id, Some(options)).await {
                        Ok(())
                        | Err(DockerError::DockerResponseServerError {
                            status_code: 404, ..
                        }) => {}
                        Err(e) => {
                            tracing::warn!(%job, "remove container {id}: {e}");
                            ok = false;
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!(%job, "list containers: {e}");
                ok = false;
            }
        }
        if ok && let Err(e) = self.network.detach(job).await {
            tracing::warn!(%job, "{e}");
            ok = false;
        }
        let dirs = self.dirs(job);
        if let Err(e) = dirs.remove_rank_dirs(&record.plan.local).await {
            tracing::warn!(%job, "remove job dirs: {e}");
            ok = false;
        }
        let _ = tokio::fs::remove_dir_all(dirs.root().join("scratch")).await;
        ok
    }

    /// Ids of every container (any state) labelled with `job`.
    ///
    /// # Errors
    /// The engine's.
    pub async fn job_containers(&self, job: &RunId) -> Result<Vec<String>, DockerError> {
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&HashMap::from([("label", vec![labels::job_filter(job)])]))
            .build();
        Ok(self
            .docker()
            .list_containers(Some(options))
            .await?
            .into_iter()
            .filter_map(|c| c.id)
            .collect())
    }

    async fn recover_inner(&self) -> Result<Vec<JobReport>, ExecError> {
        let mut reports = vec![];
        for mut record in self.table.all()? {
            let t0 = Instant::now();
            let Some(_active) = Active::claim(&self.active, &record.plan.job) else {
                continue; // supervised by a `run` of this process
            };
            if record.phase.is_terminal() {
                if !record.cleaned {
                    record.cleaned = self.cleanup(&record).await;
                    self.table.put(&record)?;
                }
                continue;
            }
            let found = self
                .job_containers(&record.plan.job)
                .await
                .map_err(ExecError::engine("list containers"))?;
            let image = record.image.clone();
            match record.phase {
                Phase::Running if !found.is_empty() => {
                    tracing::info!(job = %record.plan.job, containers = found.len(), "adopting");
                    let report = self
                        .supervise(record, image, Timings::default(), t0, true)
                        .await?;
                    reports.push(report);
                }
                Phase::Running => {
                    let reason = FailureReason::EngineUnavailable {
                        detail: "the job's containers vanished while the node was down".into(),
                    };
                    reports.push(
                        self.finish(
                            &mut record,
                            image,
                            vec![],
                            Some(reason),
                            Timings::default(),
                            t0,
                            true,
                        )
                        .await?,
                    );
                }
                _ if self.started_any(&found).await? => {
                    // Started before the crash, though `Running` was not recorded yet.
                    tracing::info!(job = %record.plan.job, "adopting (started before the crash)");
                    record.phase = Phase::Running;
                    record.started_at_unix_ms.get_or_insert_with(unix_ms);
                    self.table.put(&record)?;
                    let report = self
                        .supervise(record, image, Timings::default(), t0, true)
                        .await?;
                    reports.push(report);
                }
                _ => {
                    // Caught in its set-up, nothing started: undo the set-up and forget the
                    // job, so that its dispatcher runs it again as its first start (after
                    // whatever must precede it, e.g. the overlay's key exchange).
                    tracing::info!(job = %record.plan.job, "set-up interrupted by a crash: undone, to be dispatched again");
                    if self.cleanup(&record).await {
                        self.table.remove(&record.plan.job)?;
                    } else {
                        // The engine would not remove the set-up: give up on the job.
                        reports.push(
                            self.finish(
                                &mut record,
                                image,
                                vec![],
                                Some(FailureReason::Interrupted),
                                Timings::default(),
                                t0,
                                true,
                            )
                            .await?,
                        );
                    }
                }
            }
        }
        Ok(reports)
    }

    /// Whether any of `containers` was ever started (left Docker's `created` state).
    async fn started_any(&self, containers: &[String]) -> Result<bool, ExecError> {
        use bollard::models::ContainerStateStatusEnum as Status;
        for id in containers {
            let inspected = self
                .docker()
                .inspect_container(id, None)
                .await
                .map_err(ExecError::engine("inspect container"))?;
            if !matches!(
                inspected.state.and_then(|s| s.status),
                Some(Status::CREATED)
            ) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

impl<S: Blockstore + 'static, N: ClusterNetwork> Executor for DockerExecutor<S, N> {
    async fn run(&self, plan: JobPlan) -> Result<JobReport, ExecError> {
        self.run_inner(plan).await
    }

    async fn recover(&self) -> Result<Vec<JobReport>, ExecError> {
        self.recover_inner().await
    }

    fn record(&self, job: &RunId) -> Result<Option<JobRecord>, ExecError> {
        self.table.get(job)
    }

    async fn stop(&self, job: &RunId, why: &str) -> Result<(), ExecError> {
        let Some(record) = self.table.get(job)? else {
            return Ok(());
        };
        if record.phase != Phase::Running {
            return Ok(());
        }
        self.stops
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(job.clone(), why.to_string());
        tracing::info!(%job, %why, "stopping the job's containers");
        self.kill_all(&record).await;
        Ok(())
    }

    async fn has_image(&self, name: &str) -> Result<bool, ExecError> {
        match self.engine.docker.inspect_image(name).await {
            Ok(_) => Ok(true),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(false),
            Err(e) => Err(ExecError::engine("inspect image")(e)),
        }
    }

    async fn connect(
        &self,
        job: &RunId,
        node_rank: u32,
        port: u16,
    ) -> Result<tokio::net::TcpStream, ExecError> {
        let unreachable = |reason: String| ExecError::Unreachable {
            job: job.to_string(),
            node_rank,
            reason,
        };
        let record = self
            .table
            .get(job)?
            .ok_or_else(|| unreachable("no such job".into()))?;
        if record.phase != Phase::Running {
            return Err(unreachable(format!("not running ({:?})", record.phase)));
        }
        let container = record
            .containers
            .iter()
            .find(|(rank, _)| *rank == node_rank)
            .map(|(_, id)| id.clone())
            .ok_or_else(|| unreachable("no such container".into()))?;
        let netns = crate::overlay::pod::sandbox_netns(self.docker(), &container)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let addr = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port));
        crate::overlay::netns::connect_in(&netns, addr, CONNECT_TIMEOUT)
            .await
            .map_err(|e| unreachable(format!("port {port}: {e}")))
    }

    async fn log_tail(
        &self,
        job: &RunId,
        node_rank: u32,
        max_bytes: u64,
    ) -> Result<Option<LogTail>, ExecError> {
        // `follow_logs` writes the file as the container writes (flushed per chunk).
        let path = self.dirs(job).log(node_rank);
        let max = max_bytes.min(MAX_LOG_TAIL_BYTES);
        let read = path.clone();
        tokio::task::spawn_blocking(move || artifacts::read_tail(&read, max))
            .await
            .map_err(|e| ExecError::Io {
                path: path.display().to_string(),
                source: std::io::Error::other(e),
            })?
            .map_err(ExecError::io(&path))
    }
}

/// How long [`Executor::connect`] waits for a replica's port to accept.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Marks a job as supervised by this task until dropped.
struct Active {
    set: Arc<std::sync::Mutex<HashSet<RunId>>>,
    job: RunId,
}

impl Active {
    /// `None` when another task supervises `job`.
    fn claim(set: &Arc<std::sync::Mutex<HashSet<RunId>>>, job: &RunId) -> Option<Self> {
        let mut jobs = set
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        jobs.insert(job.clone()).then(|| Self {
            set: Arc::clone(set),
            job: job.clone(),
        })
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        let mut jobs = self
            .set
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        jobs.remove(&self.job);
    }
}

/// The container name of `rank` of `job` (the engine refuses a second container with it).
pub fn container_name(job: &RunId, rank: u32) -> String {
    format!("ganglion-{job}-r{rank}")
}

/// Waits for the container to stop; a non-zero exit is an exit code, not an error (bollard
/// reports it as `DockerContainerWaitError`, DESIGN §6).
async fn wait_exit(docker: &Docker, id: &str) -> Result<i64, DockerError> {
    let options = WaitContainerOptionsBuilder::default()
        .condition("not-running")
        .build();
    let mut stream = docker.wait_container(id, Some(options));
    match stream.next().await {
        Some(Ok(r)) => Ok(r.status_code),
        Some(Err(DockerError::DockerContainerWaitError { code, .. })) => Ok(code),
        Some(Err(e)) => Err(e),
        None => Err(DockerError::DockerStreamError {
            error: "wait stream ended without a status".into(),
        }),
    }
}

/// Resolves when a rank's `/outputs` grows over its allowance (checked every `every`); never
/// resolves otherwise. Unreadable dirs are skipped here (the final check reports them).
async fn watch_outputs(watched: Vec<(u32, PathBuf, u64)>, every: Duration) -> FailureReason {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let dirs = watched.clone();
        let over = tokio::task::spawn_blocking(move || {
            dirs.into_iter().find_map(|(rank, dir, limit)| {
                let bytes = artifacts::dir_bytes(&dir).ok()?;
                (bytes > limit).then_some(FailureReason::OutputsTooLarge {
                    node_rank: rank,
                    bytes,
                    limit_bytes: limit,
                })
            })
        })
        .await;
        if let Ok(Some(reason)) = over {
            return reason;
        }
    }
}

/// Streams the container's stdout+stderr from the start into `path` (truncating it: an
/// adopted job's log is written again in full).
async fn follow_logs(docker: Docker, id: String, path: PathBuf) {
    let file = match tokio::fs::File::create(&path).await {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!("log file {}: {e}", path.display());
            return;
        }
    };
    let mut out = tokio::io::BufWriter::new(file);
    let options = LogsOptionsBuilder::default()
        .follow(true)
        .stdout(true)
        .stderr(true)
        .build();
    let mut logs = docker.logs(&id, Some(options));
    while let Some(item) = logs.next().await {
        match item {
            Ok(chunk) => {
                if out.write_all(&chunk.into_bytes()).await.is_err() {
                    break;
                }
                // Flush per chunk: the file is complete whenever the task is stopped.
                let _ = out.flush().await;
            }
            Err(e) => {
                tracing::debug!("logs of {id}: {e}");
                break;
            }
        }
    }
    let _ = out.flush().await;
}

/// Samples the engine's stats stream: last cumulative CPU time, peak memory.
async fn sample_stats(
    docker: Docker,
    id: String,
    rank: u32,
    usage: Arc<std::sync::Mutex<HashMap<u32, Usage>>>,
) {
    let options = StatsOptionsBuilder::default().stream(true).build();
    let mut stats = docker.stats(&id, Some(options));
    while let Some(Ok(s)) = stats.next().await {
        let cpu = s
            .cpu_stats
            .and_then(|c| c.cpu_usage)
            .and_then(|u| u.total_usage)
            .unwrap_or(0);
        let mem = s
            .memory_stats
            .map(|m| m.max_usage.unwrap_or(0).max(m.usage.unwrap_or(0)))
            .unwrap_or(0);
        if let Ok(mut map) = usage.lock() {
            let u = map.entry(rank).or_default();
            u.cpu_ns = u.cpu_ns.max(cpu);
            u.peak_memory_bytes = u.peak_memory_bytes.max(mem);
            u.samples += 1;
        }
    }
}

fn engine_failure(operation: &str, e: DockerError) -> FailureReason {
    FailureReason::EngineUnavailable {
        detail: format!("{operation}: {e}"),
    }
}

fn run_seconds(started: Option<&str>, finished: Option<&str>) -> f64 {
    use time::OffsetDateTime;
    use time::format_description::well_known::Rfc3339;
    let parse = |s: Option<&str>| s.and_then(|s| OffsetDateTime::parse(s, &Rfc3339).ok());
    match (parse(started), parse(finished)) {
        (Some(a), Some(b)) if b > a => (b - a).as_seconds_f64(),
        _ => 0.0,
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(ms)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_times_give_run_seconds() {
        let s = run_seconds(
            Some("2026-11-30T05:20:01.250000000Z"),
            Some("2026-11-30T05:20:03.750000000Z"),
        );
        assert!((s - 2.5).abs() < 1e-9, "{s}");
        // A container that never finished (Docker's zero time) counts nothing.
        assert_eq!(
            run_seconds(Some("2026-11-30T05:20:01Z"), Some("0001-01-01T00:00:00Z")),
            0.0
        );
        assert_eq!(run_seconds(None, None), 0.0);
    }

    #[test]
    fn container_names_carry_job_and_rank() {
        let job = RunId::new("abc-1").expect("valid");
        assert_eq!(container_name(&job, 3), "ganglion-abc-1-r3");
    }
}
