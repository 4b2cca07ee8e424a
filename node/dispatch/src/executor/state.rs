//! The executor's durable job table (sled): one record per job id, written before any
//! container exists and after every phase change, flushed each time, so a node killed at any
//! point (kill -9 included) knows on restart which jobs it created, started or finished, and
//! never starts one twice.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ExecError;
use super::image::ImageRecord;
use super::plan::{JobPlan, RunId};
use super::report::JobReport;

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Accepted; image, network, dirs and containers being set up (none started).
    Preparing,
    /// Every local container was started.
    Running,
    /// Finished successfully; outputs pinned.
    Succeeded,
    /// Failed; the reason is in the report.
    Failed,
}

impl Phase {
    /// Succeeded or failed.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Preparing => "preparing",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
        })
    }
}

/// One job's durable record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// The plan as accepted.
    pub plan: JobPlan,
    /// The phase.
    pub phase: Phase,
    /// Container ids by node rank (filled at create).
    pub containers: Vec<(u32, String)>,
    /// The image, once resolved.
    #[serde(default)]
    pub image: Option<ImageRecord>,
    /// Unix time (ms) when the last container was started: the wall-clock limit counts from
    /// here, also after a restart.
    pub started_at_unix_ms: Option<u64>,
    /// The final report (terminal phases).
    pub report: Option<JobReport>,
    /// Whether containers, network and job dirs were removed.
    pub cleaned: bool,
}

impl JobRecord {
    /// A fresh record for `plan`.
    pub fn new(plan: JobPlan) -> Self {
        Self {
            plan,
            phase: Phase::Preparing,
            containers: vec![],
            image: None,
            started_at_unix_ms: None,
            report: None,
            cleaned: false,
        }
    }
}

/// The job table.
#[derive(Clone)]
pub struct JobTable {
    db: sled::Db,
    jobs: sled::Tree,
}

impl JobTable {
    /// Opens (or creates) the table at `path`.
    ///
    /// # Errors
    /// [`ExecError::State`] (e.g. another process holds it).
    pub fn open(path: &Path) -> Result<Self, ExecError> {
        let db = ganglion_sled::open(path)?;
        let jobs = db.open_tree("executor-jobs")?;
        Ok(Self { db, jobs })
    }

    /// Inserts `record` unless its job id is already present.
    ///
    /// # Errors
    /// [`ExecError::AlreadyKnown`] with the recorded phase; store errors.
    pub fn insert_new(&self, record: &JobRecord) -> Result<(), ExecError> {
        let key = record.plan.job.as_str().as_bytes();
        let value = serde_json::to_vec(record)?;
        match self
            .jobs
            .compare_and_swap(key, None::<&[u8]>, Some(value))?
        {
            Ok(()) => {
                self.db.flush()?;
                Ok(())
            }
            Err(existing) => {
                let phase = existing
                    .current
                    .and_then(|v| serde_json::from_slice::<JobRecord>(&v).ok())
                    .map_or_else(|| "unreadable".to_string(), |r| r.phase.to_string());
                Err(ExecError::AlreadyKnown {
                    job: record.plan.job.to_string(),
                    phase,
                })
            }
        }
    }

    /// Overwrites `record` and flushes.
    ///
    /// # Errors
    /// Store errors.
    pub fn put(&self, record: &JobRecord) -> Result<(), ExecError> {
        self.jobs.insert(
            record.plan.job.as_str().as_bytes(),
            serde_json::to_vec(record)?,
        )?;
        self.db.flush()?;
        Ok(())
    }

    /// Forgets `job` and flushes (a set-up undone after a crash, before its first start).
    ///
    /// # Errors
    /// Store errors.
    pub fn remove(&self, job: &RunId) -> Result<(), ExecError> {
        self.jobs.remove(job.as_str().as_bytes())?;
        self.db.flush()?;
        Ok(())
    }

    /// The record of `job`.
    ///
    /// # Errors
    /// Store or decode errors.
    pub fn get(&self, job: &RunId) -> Result<Option<JobRecord>, ExecError> {
        Ok(match self.jobs.get(job.as_str().as_bytes())? {
            Some(v) => Some(serde_json::from_slice(&v)?),
            None => None,
        })
    }

    /// Every record.
    ///
    /// # Errors
    /// Store or decode errors.
    pub fn all(&self) -> Result<Vec<JobRecord>, ExecError> {
        self.jobs
            .iter()
            .map(|kv| Ok(serde_json::from_slice(&kv?.1)?))
            .collect()
    }
}
