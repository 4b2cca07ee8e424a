//! A throwaway PostgreSQL server for the devnet's indexer on PostgreSQL and for tests:
//! `initdb` into a temporary folder, `pg_ctl start` on a Unix socket in that folder (no TCP
//! port to collide with other tests), `pg_ctl stop -m immediate` and the folder removed on
//! drop.
//!
//! The server binaries come from Debian's `postgresql` package (`/usr/lib/postgresql/<v>/bin`,
//! the newest version there) or from `PATH`. PostgreSQL refuses to run as root: as root the
//! cluster is created and run as the `postgres` user the package creates (`runuser`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Why a cluster could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// No `initdb` found.
    #[error(
        "PostgreSQL's server binaries (initdb, pg_ctl) are not installed: install Debian's \
         `postgresql` package (scripts/setup.sh does)"
    )]
    NotInstalled,
    /// Running as root without a `postgres` user to run the server as.
    #[error(
        "running as root and there is no `postgres` user to run the server as (PostgreSQL refuses root)"
    )]
    NoServerUser,
    /// A command failed.
    #[error("{command} failed: {output}")]
    Command {
        /// The command line.
        command: String,
        /// Its stderr and stdout.
        output: String,
    },
    /// File system errors.
    #[error("cluster folder: {0}")]
    Io(#[from] std::io::Error),
}

/// A running throwaway PostgreSQL server; stopped and removed on drop.
#[derive(Debug)]
pub struct Cluster {
    dir: PathBuf,
    bin: PathBuf,
    as_user: Option<&'static str>,
    databases: AtomicU32,
}

/// Superuser name `initdb` gives the cluster (trust authentication on the socket).
pub const SUPERUSER: &str = "ganglion";
/// The socket's port number (part of the socket's file name; no TCP listener).
const PORT: u16 = 5432;

fn bin_dir() -> Result<PathBuf, ClusterError> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .find(|d| d.join("initdb").exists() && d.join("pg_ctl").exists())
        .ok_or(ClusterError::NotInstalled)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl Cluster {
    /// Creates and starts a cluster in a new folder under the system's temporary folder.
    ///
    /// # Errors
    /// [`ClusterError`]: binaries missing, root without a `postgres` user, `initdb` or
    /// `pg_ctl` failing (their output is in the error).
    pub fn start() -> Result<Self, ClusterError> {
        let bin = bin_dir()?;
        let as_user = if is_root() {
            let known = Command::new("id")
                .arg("postgres")
                .output()
                .is_ok_and(|o| o.status.success());
            if !known {
                return Err(ClusterError::NoServerUser);
            }
            Some("postgres")
        } else {
            None
        };
        reap_orphans(&bin, as_user);
        static SEQ: AtomicU32 = AtomicU32::new(0);
        // Short: the socket path (dir + "/.s.PGSQL.5432") must stay under 108 bytes.
        let dir = std::env::temp_dir().join(format!(
            "ganglion-pg-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        let cluster = Self {
            dir,
            bin,
            as_user,
            databases: AtomicU32::new(0),
        };
        if let Some(user) = as_user {
            cluster.run(Command::new("chown").args([user, &cluster.dir.display().to_string()]))?;
        }
        let data = cluster.data().display().to_string();
        cluster.server_command(
            "initdb",
            &[
                "-D", &data, "-U", SUPERUSER, "-A", "trust", "-N", "-E", "UTF8",
            ],
        )?;
        let options = format!(
            "-c listen_addresses='' -c unix_socket_directories='{}' -p {PORT}",
            cluster.dir.display()
        );
        let log = cluster.dir.join("server.log").display().to_string();
        cluster.server_command(
            "pg_ctl",
            &[
                "-D", &data, "-o", &options, "-l", &log, "-w", "-t", "60", "start",
            ],
        )?;
        Ok(cluster)
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The folder holding the data, the socket and `server.log`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The URL of database `name` on this cluster (`postgres://ganglion@%2Ftmp%2F…/name`).
    pub fn url(&self, name: &str) -> String {
        let host: String = self
            .dir
            .display()
            .to_string()
            .replace('%', "%25")
            .replace('/', "%2F");
        format!("postgres://{SUPERUSER}@{host}:{PORT}/{name}")
    }

    /// Creates a new empty database and returns its URL.
    ///
    /// # Errors
    /// `createdb` failing.
    pub fn create_database(&self) -> Result<String, ClusterError> {
        let name = format!("ix{}", self.databases.fetch_add(1, Ordering::Relaxed));
        let host = self.dir.display().to_string();
        let port = PORT.to_string();
        self.server_command(
            "createdb",
            &["-h", &host, "-p", &port, "-U", SUPERUSER, &name],
        )?;
        Ok(self.url(&name))
    }

    /// Runs one of the server's programs, as the server's user.
    fn server_command(&self, program: &str, args: &[&str]) -> Result<(), ClusterError> {
        let path = self.bin.join(program);
        let mut cmd = match self.as_user {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&path);
                c
            }
            None => Command::new(&path),
        };
        cmd.args(args);
        self.run(&mut cmd)
    }

    fn run(&self, cmd: &mut Command) -> Result<(), ClusterError> {
        let out = cmd.output()?;
        if out.status.success() {
            return Ok(());
        }
        Err(ClusterError::Command {
            command: format!("{cmd:?}"),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            ),
        })
    }
}

/// Stops and removes the clusters of processes that are gone (a test killed before its
/// drop ran leaves its server running): each folder's name carries its owner's pid.
fn reap_orphans(bin: &Path, as_user: Option<&'static str>) {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("ganglion-pg-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let orphan = Cluster {
            dir: e.path(),
            bin: bin.to_path_buf(),
            as_user,
            databases: AtomicU32::new(0),
        };
        tracing::info!(dir = %orphan.dir.display(), "removing a PostgreSQL cluster whose owner is gone");
        drop(orphan);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data().display().to_string();
        if let Err(e) =
            self.server_command("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"])
        {
            tracing::warn!(error = %e, "stopping the throwaway PostgreSQL cluster");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
