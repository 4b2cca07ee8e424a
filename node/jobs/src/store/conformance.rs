//! One conformance suite for both backends. [`on_both_backends!`] runs a test fn taking a
//! [`Backing`] once on sled (`…::sled::name`) and once on the in-memory twin
//! (`…::memory::name`); the store's and the receipts' tests use it, and the tests here pin the
//! twin's semantics to sled's: compare-and-swap on absent, present and changed values, key
//! order of iteration and prefix scans, and concurrent conditional updates.

use ganglion_contracts::v2::datum::JobId;

use super::{Backend, JobRecord, JobStore, Orchestrating, StoreError, Swap};
use crate::state::OrchestratorState;

/// The data a test's stores live on.
pub(crate) enum Backing {
    /// A sled database in a temporary folder.
    Sled(tempfile::TempDir),
    /// The in-memory twin.
    Memory(JobStore),
}

impl Backing {
    /// A fresh sled database.
    pub(crate) fn sled() -> Self {
        Self::Sled(tempfile::tempdir().expect("tempdir"))
    }

    /// A fresh in-memory store.
    pub(crate) fn memory() -> Self {
        Self::Memory(JobStore::in_memory())
    }

    /// A store over this backing's data, each call the same data: sled opens its folder again
    /// (drop the previous store first, as a restarted node would); the twin hands out its one
    /// map again.
    pub(crate) fn open(&self) -> JobStore {
        match self {
            Self::Sled(dir) => JobStore::open(&dir.path().join("jobs")).expect("open sled store"),
            Self::Memory(store) => store.clone(),
        }
    }
}

/// `on_both_backends!(a, b, …)`: for each `fn a(b: Backing)` in scope, a `#[test]` on sled
/// (`sled::a`) and one on the twin (`memory::a`).
macro_rules! on_both_backends {
    ($($test:ident),+ $(,)?) => {
        mod sled {
            $(
                #[test]
                fn $test() {
                    super::$test($crate::store::conformance::Backing::sled())
                }
            )+
        }
        mod memory {
            $(
                #[test]
                fn $test() {
                    super::$test($crate::store::conformance::Backing::memory())
                }
            )+
        }
    };
}
pub(crate) use on_both_backends;

type Counter = Orchestrating<u64>;

const T: &str = "conformance";

fn put(b: &dyn Backend, key: &[u8], value: &[u8]) {
    b.insert(T, key, value.to_vec()).expect("insert");
}

fn keys(entries: Vec<super::Entry>) -> Vec<Vec<u8>> {
    entries.into_iter().map(|(k, _)| k).collect()
}

on_both_backends!(
    compare_and_swap_on_absent_present_and_changed_values,
    insert_and_remove_return_what_was_there_and_trees_are_apart,
    iteration_is_in_bytewise_key_order,
    a_prefix_scan_returns_exactly_the_prefixed_keys_in_key_order,
    writes_are_seen_by_every_clone_and_flush_succeeds,
    concurrent_conditional_updates_change_a_counter_exactly_n_times,
    of_concurrent_claims_on_one_condition_exactly_one_wins,
    of_concurrent_creates_of_one_job_exactly_one_wins,
);

fn compare_and_swap_on_absent_present_and_changed_values(b: Backing) {
    let s = b.open();
    let b = s.backend();
    let k = b"job".as_slice();
    // Absent, absence expected: swapped in.
    assert_eq!(
        b.compare_and_swap(T, k, None, Some(b"v1".to_vec()))
            .expect("cas"),
        Swap::Swapped
    );
    // Present, absence expected: refused, the current value reported, nothing written.
    assert_eq!(
        b.compare_and_swap(T, k, None, Some(b"v2".to_vec()))
            .expect("cas"),
        Swap::Conflict {
            current: Some(b"v1".to_vec())
        }
    );
    assert_eq!(b.get(T, k).expect("get"), Some(b"v1".to_vec()));
    // Present and as expected: swapped.
    assert_eq!(
        b.compare_and_swap(T, k, Some(b"v1"), Some(b"v2".to_vec()))
            .expect("cas"),
        Swap::Swapped
    );
    // Changed since it was read: refused with the value it holds now.
    assert_eq!(
        b.compare_and_swap(T, k, Some(b"v1"), Some(b"v3".to_vec()))
            .expect("cas"),
        Swap::Conflict {
            current: Some(b"v2".to_vec())
        }
    );
    assert_eq!(b.get(T, k).expect("get"), Some(b"v2".to_vec()));
    // Expected present but absent: refused, current `None`.
    assert_eq!(
        b.compare_and_swap(T, b"other", Some(b"v1"), Some(b"x".to_vec()))
            .expect("cas"),
        Swap::Conflict { current: None }
    );
    assert_eq!(b.get(T, b"other").expect("get"), None);
    // Swapping to `None` removes; absent to absent is a swap that writes nothing.
    assert_eq!(
        b.compare_and_swap(T, k, Some(b"v2"), None).expect("cas"),
        Swap::Swapped
    );
    assert_eq!(b.get(T, k).expect("get"), None);
    assert_eq!(
        b.compare_and_swap(T, k, None, None).expect("cas"),
        Swap::Swapped
    );
    assert_eq!(b.get(T, k).expect("get"), None);
    // The same value rewritten: a swap.
    put(b, k, b"same");
    assert_eq!(
        b.compare_and_swap(T, k, Some(b"same"), Some(b"same".to_vec()))
            .expect("cas"),
        Swap::Swapped
    );
}

fn insert_and_remove_return_what_was_there_and_trees_are_apart(b: Backing) {
    let s = b.open();
    let b = s.backend();
    assert_eq!(b.get("a", b"k").expect("get"), None);
    assert_eq!(b.insert("a", b"k", b"1".to_vec()).expect("insert"), None);
    assert_eq!(
        b.insert("a", b"k", b"2".to_vec()).expect("insert"),
        Some(b"1".to_vec())
    );
    // The same key in another tree is another entry.
    assert_eq!(b.get("b", b"k").expect("get"), None);
    assert_eq!(b.insert("b", b"k", b"x".to_vec()).expect("insert"), None);
    assert_eq!(b.remove("a", b"k").expect("remove"), Some(b"2".to_vec()));
    assert_eq!(b.remove("a", b"k").expect("remove"), None);
    assert_eq!(b.remove("never-written", b"k").expect("remove"), None);
    assert_eq!(b.get("b", b"k").expect("get"), Some(b"x".to_vec()));
    assert!(b.iter("a").expect("iter").is_empty());
    assert!(b.iter("never-written").expect("iter").is_empty());
    // An empty key and an empty value are entries like any other.
    put(b, b"", b"");
    assert_eq!(b.get(T, b"").expect("get"), Some(Vec::new()));
}

fn iteration_is_in_bytewise_key_order(b: Backing) {
    let s = b.open();
    let b = s.backend();
    for k in [
        &[2u8][..],
        &[1, 255],
        &[],
        &[1],
        &[255, 0],
        &[1, 0],
        &[0, 9, 9],
    ] {
        put(b, k, &[k.len() as u8]);
    }
    let all = b.iter(T).expect("iter");
    assert_eq!(
        keys(all.clone()),
        vec![
            vec![],
            vec![0, 9, 9],
            vec![1],
            vec![1, 0],
            vec![1, 255],
            vec![2],
            vec![255, 0],
        ]
    );
    assert!(all.iter().all(|(k, v)| v == &[k.len() as u8]));
}

fn a_prefix_scan_returns_exactly_the_prefixed_keys_in_key_order(b: Backing) {
    let s = b.open();
    let b = s.backend();
    for k in [
        &[1u8, 2, 3][..],
        &[1, 1],
        &[0, 1, 1],
        &[1],
        &[1, 1, 0],
        &[2],
        &[1, 255, 255],
        &[255],
        &[255, 255],
    ] {
        put(b, k, k);
    }
    let scan = |p: &[u8]| keys(b.scan_prefix(T, p).expect("scan"));
    assert_eq!(
        scan(&[1]),
        vec![
            vec![1],
            vec![1, 1],
            vec![1, 1, 0],
            vec![1, 2, 3],
            vec![1, 255, 255]
        ]
    );
    assert_eq!(scan(&[1, 1]), vec![vec![1, 1], vec![1, 1, 0]]);
    assert_eq!(scan(&[1, 255]), vec![vec![1, 255, 255]]);
    assert_eq!(scan(&[255]), vec![vec![255], vec![255, 255]]);
    assert_eq!(scan(&[3]), Vec::<Vec<u8>>::new());
    assert_eq!(scan(&[1, 2, 3, 4]), Vec::<Vec<u8>>::new());
    assert_eq!(scan(&[]), keys(b.iter(T).expect("iter")));
    assert!(
        b.scan_prefix("never-written", &[1])
            .expect("scan")
            .is_empty()
    );
}

fn writes_are_seen_by_every_clone_and_flush_succeeds(b: Backing) {
    let s = b.open();
    let other = s.clone();
    put(s.backend(), b"k", b"v");
    assert_eq!(
        other.backend().get(T, b"k").expect("get"),
        Some(b"v".to_vec())
    );
    other.backend().flush().expect("flush");
}

/// Threads × increments each: every `update_if` reports a change and none is lost.
const THREADS: u64 = 8;
const EACH: u64 = 25;

fn counter(b: &Backing) -> (JobStore, JobId) {
    let s = b.open();
    let job = JobId([9; 32]);
    s.create::<Counter>(&JobRecord::new(job, OrchestratorState::Locked, 0, 0))
        .expect("create");
    (s, job)
}

fn concurrent_conditional_updates_change_a_counter_exactly_n_times(b: Backing) {
    let (s, job) = counter(&b);
    std::thread::scope(|scope| {
        for _ in 0..THREADS {
            let s = s.clone();
            scope.spawn(move || {
                for _ in 0..EACH {
                    assert!(
                        s.update_if::<Counter>(&job, |_| true, |r| r.detail += 1)
                            .expect("update")
                    );
                }
            });
        }
    });
    let r = s.get::<Counter>(&job).expect("get").expect("present");
    assert_eq!(r.detail, THREADS * EACH);
}

fn of_concurrent_claims_on_one_condition_exactly_one_wins(b: Backing) {
    let (s, job) = counter(&b);
    let won: Vec<bool> = std::thread::scope(|scope| {
        let handles: Vec<_> = (1..=THREADS)
            .map(|i| {
                let s = s.clone();
                scope.spawn(move || {
                    s.update_if::<Counter>(&job, |r| r.detail == 0, |r| r.detail = i)
                        .expect("update")
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    assert_eq!(won.iter().filter(|w| **w).count(), 1);
    let winner = won.iter().position(|w| *w).expect("a winner") as u64 + 1;
    let r = s.get::<Counter>(&job).expect("get").expect("present");
    assert_eq!(r.detail, winner);
}

fn of_concurrent_creates_of_one_job_exactly_one_wins(b: Backing) {
    let s = b.open();
    let job = JobId([4; 32]);
    let created: Vec<Result<(), StoreError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (1..=THREADS)
            .map(|i| {
                let s = s.clone();
                scope.spawn(move || {
                    s.create::<Counter>(&JobRecord::new(job, OrchestratorState::Locked, i, 0))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    assert_eq!(created.iter().filter(|r| r.is_ok()).count(), 1);
    assert!(
        created
            .iter()
            .filter_map(|r| r.as_ref().err())
            .all(|e| matches!(e, StoreError::Exists { .. }))
    );
    let winner = created.iter().position(Result::is_ok).expect("a winner") as u64 + 1;
    assert_eq!(
        s.get::<Counter>(&job)
            .expect("get")
            .expect("present")
            .detail,
        winner
    );
}
