//! The node's long-lived work as named critical tasks (reth's `spawn_critical`, dolos's
//! daemon: STYLE §1).
//!
//! Each task — the indexer's chain sync, the swarm, the job engine, the JSON-RPC server, the
//! metrics endpoint — runs until the node stops it. One that ends on its own, with an error, a
//! panic or even `Ok`, leaves the node serving from a frozen view, so the first such end stops
//! the node: [`Supervisor::until_shutdown`] returns it as [`TaskEnded`], naming the task, and
//! `ganglion node run` exits non-zero with that name.

use std::collections::HashMap;
use std::fmt::Display;
use std::future::Future;

use tokio::task::{Id, JoinSet};
use tokio_util::sync::CancellationToken;

/// A critical task ended while the node was running.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("critical task `{name}` stopped: {reason}")]
pub struct TaskEnded {
    /// The task's name, e.g. `indexer sync`.
    pub name: &'static str,
    /// Its error, `panicked: …`, or `ended` when it returned without one.
    pub reason: String,
}

/// The node's critical tasks. See the module docs.
#[derive(Debug, Default)]
pub struct Supervisor {
    tasks: JoinSet<Result<(), String>>,
    names: HashMap<Id, &'static str>,
}

impl Supervisor {
    /// No tasks yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `task` as the critical task `name` on the current tokio runtime.
    pub fn spawn<F, E>(&mut self, name: &'static str, task: F)
    where
        F: Future<Output = Result<(), E>> + Send + 'static,
        E: Display,
    {
        let handle = self
            .tasks
            .spawn(async move { task.await.map_err(|e| e.to_string()) });
        self.names.insert(handle.id(), name);
    }

    /// The names of the tasks still running, in no particular order.
    pub fn running(&self) -> Vec<&'static str> {
        self.names.values().copied().collect()
    }

    /// Waits until `shutdown` is cancelled (`Ok`) or a task ends first (`Err`, naming it). A
    /// supervisor without tasks waits for `shutdown` alone.
    ///
    /// # Errors
    /// [`TaskEnded`] for the first task that ended.
    pub async fn until_shutdown(&mut self, shutdown: &CancellationToken) -> Result<(), TaskEnded> {
        if self.tasks.is_empty() {
            shutdown.cancelled().await;
            return Ok(());
        }
        tokio::select! {
            biased;
            () = shutdown.cancelled() => Ok(()),
            Some(joined) = self.tasks.join_next_with_id() => Err(self.ended(joined)),
        }
    }

    fn ended(
        &mut self,
        joined: Result<(Id, Result<(), String>), tokio::task::JoinError>,
    ) -> TaskEnded {
        let (id, reason) = match joined {
            Ok((id, Ok(()))) => (id, "ended".to_string()),
            Ok((id, Err(e))) => (id, e),
            Err(e) if e.is_panic() => (e.id(), format!("panicked: {}", panic_message(e))),
            Err(e) => (e.id(), "cancelled".to_string()),
        };
        let name = self.names.remove(&id).unwrap_or("unnamed");
        TaskEnded { name, reason }
    }

    /// Aborts every task still running and waits until each is gone.
    pub async fn shutdown(mut self) {
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
    }
}

fn panic_message(e: tokio::task::JoinError) -> String {
    let payload = e.into_panic();
    payload
        .downcast_ref::<&str>()
        .map(ToString::to_string)
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn forever() -> impl Future<Output = Result<(), String>> + Send + 'static {
        std::future::pending()
    }

    #[tokio::test]
    async fn the_first_task_to_fail_is_named_with_its_error() {
        let mut s = Supervisor::new();
        s.spawn("swarm", forever());
        s.spawn("indexer sync", async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            Err::<(), _>("store: No space left on device")
        });
        let shutdown = CancellationToken::new();
        let ended = s
            .until_shutdown(&shutdown)
            .await
            .expect_err("a task failed");
        assert_eq!(
            ended,
            TaskEnded {
                name: "indexer sync",
                reason: "store: No space left on device".into()
            }
        );
        assert_eq!(
            ended.to_string(),
            "critical task `indexer sync` stopped: store: No space left on device"
        );
        assert_eq!(s.running(), vec!["swarm"]);
        s.shutdown().await;
    }

    #[tokio::test]
    async fn a_task_that_returns_or_panics_is_a_stop_too() {
        let mut s = Supervisor::new();
        s.spawn("metrics", async { Ok::<(), String>(()) });
        let ended = s
            .until_shutdown(&CancellationToken::new())
            .await
            .expect_err("ended");
        assert_eq!((ended.name, ended.reason.as_str()), ("metrics", "ended"));

        let mut s = Supervisor::new();
        s.spawn("engine", async {
            if true {
                panic!("boom");
            }
            Ok::<(), String>(())
        });
        let ended = s
            .until_shutdown(&CancellationToken::new())
            .await
            .expect_err("panicked");
        assert_eq!(
            (ended.name, ended.reason.as_str()),
            ("engine", "panicked: boom")
        );
    }

    #[tokio::test]
    async fn shutdown_wins_while_every_task_runs_and_aborts_them() {
        let mut s = Supervisor::new();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        s.spawn("rpc", async move {
            let _alive = tx;
            std::future::pending::<Result<(), String>>().await
        });
        let shutdown = CancellationToken::new();
        shutdown.cancel();
        assert_eq!(s.until_shutdown(&shutdown).await, Ok(()));
        s.shutdown().await;
        assert!(rx.await.is_err(), "the task was dropped");
    }
}
