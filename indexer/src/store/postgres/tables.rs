//! Which table holds a key, and the typed columns (and rows of derived tables) a write puts
//! beside the key and its value. The schema is `indexer/migrations/`.

use ganglion_contracts::v2::datum::GanglionDatum;
use postgres::types::ToSql;

use crate::apply::{Point, parse};
use crate::error::{Error, Result};
use crate::event::{ClaimOutcome, Event, Record};
use crate::extract::Tracked;
use crate::keys;
use crate::view::JobView;

/// One table per prefix of the key space ([`crate::keys`]), plus one for any other key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Table {
    Cursor,
    Undo,
    Utxos,
    Events,
    Jobs,
    ByOrchestrator,
    Assignments,
    Other,
}

impl Table {
    pub(super) const ALL: [Table; 8] = [
        Table::Cursor,
        Table::Undo,
        Table::Utxos,
        Table::Events,
        Table::Jobs,
        Table::ByOrchestrator,
        Table::Assignments,
        Table::Other,
    ];

    /// The table holding `key`.
    pub(super) fn of(key: &[u8]) -> Table {
        Table::ALL
            .into_iter()
            .find(|t| match t.prefix() {
                Some(Span::Exact(k)) => key == k,
                Some(Span::Prefix(p)) => key.starts_with(p),
                None => false,
            })
            .unwrap_or(Table::Other)
    }

    fn prefix(self) -> Option<Span> {
        Some(match self {
            Table::Cursor => Span::Exact(keys::CURSOR),
            Table::Undo => Span::Prefix(keys::UNDO.as_bytes()),
            Table::Utxos => Span::Prefix(keys::UTXO.as_bytes()),
            Table::Events => Span::Prefix(keys::EVENT.as_bytes()),
            Table::Jobs => Span::Prefix(keys::JOB.as_bytes()),
            Table::ByOrchestrator => Span::Prefix(keys::BY_ORCHESTRATOR.as_bytes()),
            Table::Assignments => Span::Prefix(keys::BY_PROVIDER.as_bytes()),
            Table::Other => return None,
        })
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Table::Cursor => "chain_cursor",
            Table::Undo => "undo_log",
            Table::Utxos => "script_utxos",
            Table::Events => "events",
            Table::Jobs => "jobs",
            Table::ByOrchestrator => "jobs_by_orchestrator",
            Table::Assignments => "assignments",
            Table::Other => "other_keys",
        }
    }

    /// The value column as bytes: `json` columns as their exact text.
    pub(super) fn body_bytes(self) -> &'static str {
        match self {
            Table::ByOrchestrator | Table::Assignments | Table::Other => "body",
            _ => "convert_to(body::text, 'UTF8')",
        }
    }

    /// Whether any key `from <= key < to` (`to = None`: unbounded) can be in this table.
    pub(super) fn meets(self, from: &[u8], to: Option<&[u8]>) -> bool {
        let (lo, hi): (&[u8], Option<Vec<u8>>) = match self.prefix() {
            Some(Span::Exact(k)) => (k, Some([k, &[0u8][..]].concat())),
            Some(Span::Prefix(p)) => (p, successor(p)),
            None => return true,
        };
        let below_hi = hi.as_deref().is_none_or(|hi| from < hi);
        let above_lo = to.is_none_or(|to| to > lo);
        below_hi && above_lo
    }
}

enum Span {
    Exact(&'static [u8]),
    Prefix(&'static [u8]),
}

/// The smallest key above every key starting with `prefix` (`None`: no such key).
pub(super) fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut s = prefix.to_vec();
    while let Some(last) = s.pop() {
        if last < u8::MAX {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

/// A column value of one row (gathered into a [`Column`] per table by [`Batch::group`]).
pub(super) enum Val {
    Bytes(Vec<u8>),
    OptBytes(Option<Vec<u8>>),
    Int(i64),
    /// A u64 amount, sent as text and stored as `numeric`.
    Num(u64),
    /// An optional u64 amount (`NULL` when absent).
    OptNum(Option<u64>),
    /// JSON text, stored as `json` (the exact text).
    Json(String),
    Text(&'static str),
    Bool(bool),
}

/// The values of one column across a batch of rows, as one array parameter.
enum Column {
    Bytes(Vec<Vec<u8>>),
    OptBytes(Vec<Option<Vec<u8>>>),
    Int(Vec<i64>),
    /// Amounts as text, cast to `numeric` in SQL.
    Num(Vec<Option<String>>),
    /// JSON text, cast to `json` in SQL.
    Json(Vec<String>),
    Text(Vec<String>),
    Bool(Vec<bool>),
}

impl Column {
    fn of(v: &Val) -> Self {
        match v {
            Val::Bytes(_) => Column::Bytes(Vec::new()),
            Val::OptBytes(_) => Column::OptBytes(Vec::new()),
            Val::Int(_) => Column::Int(Vec::new()),
            Val::Num(_) | Val::OptNum(_) => Column::Num(Vec::new()),
            Val::Json(_) => Column::Json(Vec::new()),
            Val::Text(_) => Column::Text(Vec::new()),
            Val::Bool(_) => Column::Bool(Vec::new()),
        }
    }

    /// Appends `v`; `false` when it is not of this column's kind.
    fn push(&mut self, v: Val) -> bool {
        match (self, v) {
            (Column::Bytes(c), Val::Bytes(b)) => c.push(b),
            (Column::OptBytes(c), Val::OptBytes(b)) => c.push(b),
            (Column::Int(c), Val::Int(i)) => c.push(i),
            (Column::Num(c), Val::Num(n)) => c.push(Some(n.to_string())),
            (Column::Num(c), Val::OptNum(n)) => c.push(n.map(|n| n.to_string())),
            (Column::Json(c), Val::Json(j)) => c.push(j),
            (Column::Text(c), Val::Text(t)) => c.push(t.to_owned()),
            (Column::Bool(c), Val::Bool(b)) => c.push(b),
            _ => return false,
        }
        true
    }

    /// The array placeholder with its casts.
    fn placeholder(&self, n: usize) -> String {
        match self {
            Column::Bytes(_) | Column::OptBytes(_) => format!("${n}::bytea[]"),
            Column::Int(_) => format!("${n}::int8[]"),
            Column::Num(_) => format!("${n}::text[]::numeric[]"),
            Column::Json(_) => format!("${n}::text[]::json[]"),
            Column::Text(_) => format!("${n}::text[]"),
            Column::Bool(_) => format!("${n}::bool[]"),
        }
    }

    fn param(&self) -> &(dyn ToSql + Sync) {
        match self {
            Column::Bytes(c) => c,
            Column::OptBytes(c) => c,
            Column::Int(c) => c,
            Column::Num(c) => c,
            Column::Json(c) => c,
            Column::Text(c) => c,
            Column::Bool(c) => c,
        }
    }
}

/// Rows of one table, column by column: inserted with one statement
/// (`INSERT … SELECT * FROM unnest($1, $2, …)`), prepared once per table.
pub(super) struct Batch {
    pub(super) table: &'static str,
    names: Vec<&'static str>,
    columns: Vec<Column>,
}

impl Batch {
    /// Groups `rows` by table, keeping the order in which tables first appear, the tables
    /// derived from events (their foreign keys) after the others.
    pub(super) fn group(rows: Vec<Row>) -> Result<Vec<Batch>> {
        let mut batches: Vec<Batch> = Vec::new();
        for row in rows {
            let i = match batches.iter().position(|b| b.table == row.table) {
                Some(i) => i,
                None => {
                    batches.push(Batch {
                        table: row.table,
                        names: row.cols.iter().map(|(n, _)| *n).collect(),
                        columns: row.cols.iter().map(|(_, v)| Column::of(v)).collect(),
                    });
                    batches.len() - 1
                }
            };
            let batch = &mut batches[i];
            if row.cols.len() != batch.columns.len() {
                return Err(Error::RowShape(row.table));
            }
            for (column, (_, v)) in batch.columns.iter_mut().zip(row.cols) {
                if !column.push(v) {
                    return Err(Error::RowShape(row.table));
                }
            }
        }
        batches.sort_by_key(|b| DERIVED.contains(&b.table));
        Ok(batches)
    }

    pub(super) fn sql(&self) -> String {
        let placeholders: Vec<String> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| c.placeholder(i + 1))
            .collect();
        format!(
            "INSERT INTO {} ({}) SELECT * FROM unnest({})",
            self.table,
            self.names.join(", "),
            placeholders.join(", ")
        )
    }

    pub(super) fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.columns.iter().map(Column::param).collect()
    }
}

/// Tables whose rows reference `events` (inserted after it).
const DERIVED: [&str; 4] = ["claims", "receipts", "payments", "slashes"];

/// One row to insert: its table and `(column, value)` pairs.
pub(super) struct Row {
    pub(super) table: &'static str,
    pub(super) cols: Vec<(&'static str, Val)>,
}

fn int(what: &'static str, v: u64) -> Result<Val> {
    i64::try_from(v)
        .map(Val::Int)
        .map_err(|_| Error::Unrepresentable { what, value: v })
}

fn text(what: &'static str, value: &[u8]) -> Result<String> {
    String::from_utf8(value.to_vec()).map_err(|e| Error::Corrupt {
        what,
        source: serde::de::Error::custom(e.to_string()),
    })
}

/// The hex part of a key after its prefix, up to the next `/` (`o/{hex}/…`, `p/{hex}/…`).
fn hex_segment(what: &'static str, key: &[u8], index: usize) -> Result<Vec<u8>> {
    let corrupt = |m: &str| Error::Corrupt {
        what,
        source: serde::de::Error::custom(m),
    };
    let s = std::str::from_utf8(key).map_err(|_| corrupt("key is not UTF-8"))?;
    let part = s
        .split('/')
        .nth(index)
        .ok_or_else(|| corrupt("short key"))?;
    hex::decode(part).map_err(|_| corrupt("key segment is not hex"))
}

/// The rows that put `value` at `key` (in `table`): the table's own row first, then rows of
/// the tables derived from it.
pub(super) fn rows(table: Table, key: &[u8], value: &[u8]) -> Result<Vec<Row>> {
    let k = || ("k", Val::Bytes(key.to_vec()));
    let own = |cols: Vec<(&'static str, Val)>| Row {
        table: table.name(),
        cols,
    };
    Ok(match table {
        Table::Cursor => {
            let p: Point = parse("cursor", value)?;
            vec![own(vec![
                k(),
                ("body", Val::Json(text("cursor", value)?)),
                ("slot", int("slot", p.slot)?),
                ("height", int("height", p.height)?),
                ("hash", Val::Bytes(p.hash.to_vec())),
            ])]
        }
        Table::Undo => {
            let height = std::str::from_utf8(&key[keys::UNDO.len()..])
                .ok()
                .and_then(|h| h.parse::<u64>().ok())
                .ok_or_else(|| Error::Corrupt {
                    what: "undo key",
                    source: serde::de::Error::custom("no height"),
                })?;
            vec![own(vec![
                k(),
                ("body", Val::Json(text("undo record", value)?)),
                ("height", int("height", height)?),
            ])]
        }
        Table::Utxos => {
            let t: Tracked = parse("utxo", value)?;
            let (kind, job, provider, gpus) = match &t.datum {
                GanglionDatum::Escrow(e) => ("escrow", Some(e.job_id.0.to_vec()), None, None),
                GanglionDatum::Bond(b) => ("bond", None, Some(b.provider.to_vec()), Some(b.gpus)),
                GanglionDatum::Burnt(j) => ("burnt", Some(j.0.to_vec()), None, None),
            };
            vec![own(vec![
                k(),
                ("body", Val::Json(text("utxo", value)?)),
                ("tx_hash", Val::Bytes(t.reference.tx_hash.to_vec())),
                ("output_index", int("output index", t.reference.index)?),
                ("kind", Val::Text(kind)),
                ("job_id", Val::OptBytes(job)),
                ("provider", Val::OptBytes(provider)),
                ("gpus", Val::OptNum(gpus)),
                ("ntx", Val::Num(t.ntx)),
            ])]
        }
        Table::Events => {
            let r: Record = parse("event", value)?;
            let mut out = vec![own(vec![
                k(),
                ("body", Val::Json(text("event", value)?)),
                ("slot", int("slot", r.meta.slot)?),
                ("height", int("height", r.meta.height)?),
                ("block", Val::Bytes(r.meta.block_hash.to_vec())),
                ("tx_hash", Val::Bytes(r.meta.tx_hash.to_vec())),
                ("tx_index", Val::Int(i64::from(r.meta.tx_index))),
                ("seq", Val::Int(i64::from(r.seq))),
                ("kind", Val::Text(kind_of(&r.event))),
                (
                    "job_id",
                    Val::OptBytes(r.event.job_id().map(|j| j.0.to_vec())),
                ),
                ("provider", Val::OptBytes(provider_of(&r.event))),
            ])];
            out.extend(derived(key, &r)?);
            out
        }
        Table::Jobs => {
            let v: JobView = parse("job", value)?;
            vec![own(vec![
                k(),
                ("body", Val::Json(text("job", value)?)),
                ("job_id", Val::Bytes(v.job_id.0.to_vec())),
                ("orchestrator", Val::Bytes(v.orchestrator.to_vec())),
                ("status", Val::Text(status_name(v.status))),
                ("gpus", Val::Num(v.gpus)),
                ("budget", Val::Num(v.budget)),
                ("last_height", int("height", v.last_height())?),
            ])]
        }
        Table::ByOrchestrator => vec![own(vec![
            k(),
            ("body", Val::Bytes(value.to_vec())),
            (
                "orchestrator",
                Val::Bytes(hex_segment("index key", key, 1)?),
            ),
            ("job_id", Val::Bytes(hex_segment("index key", key, 2)?)),
        ])],
        Table::Assignments => vec![own(vec![
            k(),
            ("body", Val::Bytes(value.to_vec())),
            ("provider", Val::Bytes(hex_segment("index key", key, 1)?)),
            ("job_id", Val::Bytes(hex_segment("index key", key, 2)?)),
        ])],
        Table::Other => vec![own(vec![k(), ("body", Val::Bytes(value.to_vec()))])],
    })
}

/// Claims, receipts, payments and slashes an event carries, keyed by the event's key.
fn derived(key: &[u8], r: &Record) -> Result<Vec<Row>> {
    let event_k = || ("event_k", Val::Bytes(key.to_vec()));
    let slot = || int("slot", r.meta.slot);
    let tx = || ("tx_hash", Val::Bytes(r.meta.tx_hash.to_vec()));
    let payment = |seq: i64, job: &[u8], kind: &'static str, payee: Option<Vec<u8>>, ntx| {
        Ok::<_, Error>(Row {
            table: "payments",
            cols: vec![
                event_k(),
                ("seq", Val::Int(seq)),
                ("job_id", Val::Bytes(job.to_vec())),
                ("kind", Val::Text(kind)),
                ("payee", Val::OptBytes(payee)),
                ("ntx", Val::Num(ntx)),
                ("slot", slot()?),
                tx(),
            ],
        })
    };
    let mut rows = Vec::new();
    match &r.event {
        Event::JobClaimed {
            job_id,
            index,
            provider,
            gpu_ms,
            paid,
            receipt,
            outcome,
            ..
        } => {
            rows.push(Row {
                table: "claims",
                cols: vec![
                    event_k(),
                    ("job_id", Val::Bytes(job_id.0.to_vec())),
                    ("provider", Val::Bytes(provider.to_vec())),
                    ("idx", int("claim index", *index)?),
                    ("slot", slot()?),
                    tx(),
                    ("gpu_ms", Val::Num(*gpu_ms)),
                    ("paid", Val::Num(*paid)),
                    (
                        "closed",
                        Val::Bool(matches!(outcome, ClaimOutcome::Closed { .. })),
                    ),
                ],
            });
            if let Some(receipt) = receipt {
                rows.push(Row {
                    table: "receipts",
                    cols: vec![
                        event_k(),
                        ("job_id", Val::Bytes(job_id.0.to_vec())),
                        ("provider", Val::Bytes(provider.to_vec())),
                        ("slot", slot()?),
                        (
                            "receipt",
                            Val::Json(serde_json::to_string(receipt).unwrap_or_default()),
                        ),
                    ],
                });
            }
            rows.push(payment(
                0,
                &job_id.0,
                "pay",
                Some(provider.to_vec()),
                *paid,
            )?);
            if let ClaimOutcome::Closed { refund } = outcome {
                rows.push(payment(1, &job_id.0, "refund", None, *refund)?);
            }
        }
        Event::JobCancelled { job_id, refund } | Event::JobExpired { job_id, refund, .. } => {
            rows.push(payment(0, &job_id.0, "refund", None, *refund)?);
        }
        Event::BondSlashed {
            provider,
            job_id,
            amount,
        } => rows.push(Row {
            table: "slashes",
            cols: vec![
                event_k(),
                ("seq", Val::Int(0)),
                ("job_id", Val::Bytes(job_id.0.to_vec())),
                ("provider", Val::Bytes(provider.to_vec())),
                ("amount", Val::Num(*amount)),
                ("slot", slot()?),
            ],
        }),
        _ => {}
    }
    Ok(rows)
}

fn kind_of(e: &Event) -> &'static str {
    match e {
        Event::BondPosted { .. } => "bond_posted",
        Event::BondUnbonding { .. } => "bond_unbonding",
        Event::BondWithdrawn { .. } => "bond_withdrawn",
        Event::BondSlashed { .. } => "bond_slashed",
        Event::JobLocked { .. } => "job_locked",
        Event::JobAssigned { .. } => "job_assigned",
        Event::JobRescaled { .. } => "job_rescaled",
        Event::JobClaimed { .. } => "job_claimed",
        Event::JobCancelled { .. } => "job_cancelled",
        Event::JobExpired { .. } => "job_expired",
        Event::Ignored { .. } => "ignored",
    }
}

fn provider_of(e: &Event) -> Option<Vec<u8>> {
    match e {
        Event::BondPosted { provider, .. }
        | Event::BondUnbonding { provider, .. }
        | Event::BondWithdrawn { provider, .. }
        | Event::BondSlashed { provider, .. }
        | Event::JobClaimed { provider, .. } => Some(provider.to_vec()),
        _ => None,
    }
}

/// The `jobs.status` column's value for `status`.
pub(super) fn status_name(status: crate::view::JobStatus) -> &'static str {
    use crate::view::JobStatus::*;
    match status {
        Locked => "locked",
        Assigned => "assigned",
        Claiming => "claiming",
        Claimed => "claimed",
        Cancelled => "cancelled",
        Expired => "expired",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_prefix_has_its_table_and_other_keys_fall_through() {
        assert_eq!(Table::of(b"c"), Table::Cursor);
        assert_eq!(Table::of(b"c2"), Table::Other);
        assert_eq!(Table::of(b"x/00000000000000000001"), Table::Undo);
        assert_eq!(Table::of(b"e/1/2/3"), Table::Events);
        assert_eq!(Table::of(b"p/ab/cd"), Table::Assignments);
        assert_eq!(Table::of(b"a/1"), Table::Other);
        assert_eq!(Table::of(b""), Table::Other);
    }

    #[test]
    fn ranges_meet_exactly_the_tables_that_can_hold_their_keys() {
        assert!(Table::Events.meets(b"e/", Some(b"e0")));
        assert!(!Table::Jobs.meets(b"e/", Some(b"e0")));
        assert!(Table::Cursor.meets(b"", None));
        assert!(!Table::Cursor.meets(b"c\0", None));
        assert!(Table::Cursor.meets(b"c", Some(b"c\0")));
        assert!(!Table::Cursor.meets(b"b", Some(b"c")));
        assert!(Table::Other.meets(b"zz", Some(b"zzz")));
        assert_eq!(successor(b"a/"), Some(b"a0".to_vec()));
        assert_eq!(successor(&[b'a', 0xff]), Some(b"b".to_vec()));
        assert_eq!(successor(&[0xff]), None);
    }
}
