-- Levee's logic tier on PostgreSQL (logic -store=postgres). Applied by
-- logic at start-up under a lock (package internal/pgschema); never edit a
-- migration once released: add the next one.

-- +goose Up
-- One row: the cluster's facts every logic process must agree with.
CREATE TABLE levee_cluster (
    id     int PRIMARY KEY CHECK (id = 1),
    shards int NOT NULL CHECK (shards > 0)
);

-- A player's state: the marshalled levee.v2.PlayerRecord (state, version).
CREATE TABLE players (
    player_id text PRIMARY KEY,
    shard     int NOT NULL,
    record    bytea NOT NULL
);

-- The first outcome of each mutation, unique by (player, request key): a
-- resend, a second logic process or a retried commit cannot apply one
-- twice, since the insert of a second outcome under the same key fails
-- the transaction that carries the change. key is the outcome key of
-- logic/record.go ("<player>/req/<id>" or "<player>/job/<job>/<key>");
-- body the marshalled levee.v2.StoredOutcome.
CREATE TABLE outcomes (
    player_id     text NOT NULL,
    key           text NOT NULL,
    shard         int NOT NULL,
    applied_at_ms bigint NOT NULL,
    body          bytea NOT NULL,
    PRIMARY KEY (player_id, key)
);
-- The purge reads a shard's oldest outcomes first.
CREATE INDEX outcomes_by_shard_time ON outcomes (shard, applied_at_ms);

-- A shard's own facts: the latest applied time of any outcome purged so
-- far (unix ms), below which a missing outcome means "expired".
CREATE TABLE shard_state (
    shard           int PRIMARY KEY,
    purged_up_to_ms bigint NOT NULL DEFAULT 0
);

-- Who serves each shard. A logic process serves a shard while it holds
-- the lease (owner = its node id, expires_at in the future by the
-- database's clock). Every takeover bumps epoch; every commit checks,
-- inside its transaction and with the row locked FOR SHARE, that owner and
-- epoch are still its own (the fence), so a process paused past its lease
-- cannot write after another took over.
CREATE TABLE shard_leases (
    shard      int PRIMARY KEY,
    owner      text NOT NULL DEFAULT '',
    addr       text NOT NULL DEFAULT '',
    epoch      bigint NOT NULL DEFAULT 0,
    expires_at timestamptz NOT NULL DEFAULT 'epoch'
);

-- The live logic processes: each heartbeats its row; the shards are
-- spread over the rows heartbeated within the lease TTL.
CREATE TABLE logic_members (
    node         text PRIMARY KEY,
    addr         text NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE logic_members;
DROP TABLE shard_leases;
DROP TABLE shard_state;
DROP TABLE outcomes;
DROP TABLE players;
DROP TABLE levee_cluster;
