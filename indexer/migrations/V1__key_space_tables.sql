-- The indexer's key space (indexer/src/keys.rs) in PostgreSQL: one table per prefix, so one
-- table per chain-derived entity. In each, `k` is the key exactly as the indexer writes it and
-- `body` the value exactly as written (`json` keeps the text byte for byte), so the store
-- answers the same `Kv` reads as sled; the typed columns are derived from key and value on
-- every write, in the same transaction, for SQL and the indexes of the auditors' queries.
-- Amounts (NTX base units, GPU-milliseconds) are numeric: they are u64 on-chain.

-- `c`: the last applied block (one row).
CREATE TABLE chain_cursor (
    k      bytea PRIMARY KEY,
    body   json NOT NULL,
    slot   bigint NOT NULL,
    height bigint NOT NULL,
    hash   bytea NOT NULL
);

-- `x/{height}`: undo records of the last k blocks.
CREATE TABLE undo_log (
    k      bytea PRIMARY KEY,
    body   json NOT NULL,
    height bigint NOT NULL
);

-- `u/{tx}#{index}`: live authentic script UTxOs: escrows (job_id) and bonds (provider).
CREATE TABLE script_utxos (
    k            bytea PRIMARY KEY,
    body         json NOT NULL,
    tx_hash      bytea NOT NULL,
    output_index bigint NOT NULL,
    kind         text NOT NULL,
    job_id       bytea,
    provider     bytea,
    gpus         numeric,
    ntx          numeric NOT NULL
);
CREATE INDEX script_utxos_job ON script_utxos (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX script_utxos_provider ON script_utxos (provider) WHERE provider IS NOT NULL;

-- `e/{slot}/{tx index}/{seq}`: every event, where it happened.
CREATE TABLE events (
    k        bytea PRIMARY KEY,
    body     json NOT NULL,
    slot     bigint NOT NULL,
    height   bigint NOT NULL,
    block    bytea NOT NULL,
    tx_hash  bytea NOT NULL,
    tx_index bigint NOT NULL,
    seq      bigint NOT NULL,
    kind     text NOT NULL,
    job_id   bytea,
    provider bytea
);
CREATE INDEX events_job ON events (job_id, slot) WHERE job_id IS NOT NULL;
CREATE INDEX events_provider ON events (provider, slot) WHERE provider IS NOT NULL;
CREATE INDEX events_tx ON events (tx_hash);
CREATE INDEX events_kind ON events (kind, slot);

-- Rows derived from events, deleted with them (a rollback deletes the event).
CREATE TABLE claims (
    event_k  bytea PRIMARY KEY REFERENCES events (k) ON DELETE CASCADE,
    job_id   bytea NOT NULL,
    provider bytea NOT NULL,
    idx      bigint NOT NULL,
    slot     bigint NOT NULL,
    tx_hash  bytea NOT NULL,
    gpu_ms   numeric NOT NULL,
    paid     numeric NOT NULL,
    closed   boolean NOT NULL
);
CREATE INDEX claims_job ON claims (job_id);
CREATE INDEX claims_provider ON claims (provider, slot);

-- Signed receipts seen on-chain (carried by claims).
CREATE TABLE receipts (
    event_k  bytea PRIMARY KEY REFERENCES events (k) ON DELETE CASCADE,
    job_id   bytea NOT NULL,
    provider bytea NOT NULL,
    slot     bigint NOT NULL,
    receipt  json NOT NULL
);
CREATE INDEX receipts_job ON receipts (job_id);

-- NTX moved out of escrows: pay to providers (claims), refunds to orchestrators.
CREATE TABLE payments (
    event_k  bytea NOT NULL REFERENCES events (k) ON DELETE CASCADE,
    seq      bigint NOT NULL,
    job_id   bytea NOT NULL,
    kind     text NOT NULL,
    payee    bytea,
    ntx      numeric NOT NULL,
    slot     bigint NOT NULL,
    tx_hash  bytea NOT NULL,
    PRIMARY KEY (event_k, seq)
);
CREATE INDEX payments_payee ON payments (payee, slot DESC, event_k DESC) WHERE kind = 'pay';
CREATE INDEX payments_job ON payments (job_id);

-- Bond slashes (a provider's provable default, DESIGN §3).
CREATE TABLE slashes (
    event_k  bytea NOT NULL REFERENCES events (k) ON DELETE CASCADE,
    seq      bigint NOT NULL,
    job_id   bytea NOT NULL,
    provider bytea NOT NULL,
    amount   numeric NOT NULL,
    slot     bigint NOT NULL,
    PRIMARY KEY (event_k, seq)
);
CREATE INDEX slashes_provider ON slashes (provider, slot);

-- `j/{job id}`: each job's read model.
CREATE TABLE jobs (
    k            bytea PRIMARY KEY,
    body         json NOT NULL,
    job_id       bytea NOT NULL UNIQUE,
    orchestrator bytea NOT NULL,
    status       text NOT NULL,
    gpus         numeric NOT NULL,
    budget       numeric NOT NULL,
    last_height  bigint NOT NULL
);
CREATE INDEX jobs_status ON jobs (status);
CREATE INDEX jobs_orchestrator ON jobs (orchestrator);

-- `o/{orchestrator}/{job id}`: jobs by orchestrator.
CREATE TABLE jobs_by_orchestrator (
    k            bytea PRIMARY KEY,
    body         bytea NOT NULL,
    orchestrator bytea NOT NULL,
    job_id       bytea NOT NULL
);

-- `p/{provider}/{job id}`: assignments (jobs by provider).
CREATE TABLE assignments (
    k        bytea PRIMARY KEY,
    body     bytea NOT NULL,
    provider bytea NOT NULL,
    job_id   bytea NOT NULL
);
CREATE INDEX assignments_provider ON assignments (provider);

-- Any other key (none in the indexer's layout; kept so the store honours every `Kv` write).
CREATE TABLE other_keys (
    k    bytea PRIMARY KEY,
    body bytea NOT NULL
);
