-- 010_idem_remember.sql: late retries recognised ([route] remember).
--
-- A route with remember = WINDOW keeps a small trace of each of its
-- completed records for WINDOW after the record expired: 64 bits of the
-- key's digest (the advisory lock id: SHA-256 of the tenant's secret hash
-- and the key), 64 bits of the request's fingerprint, when the record
-- expired and when the trace is forgotten.  A retry of the same key with
-- the same request inside the window is answered 410
-- idempotency-key-expired instead of executing a second time; another
-- request under the key, or a key never seen, executes as before.
--
-- The window is written on the record when it is created (remember_ms),
-- so that eviction needs no configuration: idemctl evict and the janitor
-- of any process keep the trace of whatever they delete.  A false 410
-- needs both 64-bit digests to collide at once (2^-128 per pair).
--
-- Size: a row is 4 int8-wide columns (60 bytes with its tuple header and
-- line pointer), the btree on key_digest ~28 bytes (random inserts leave
-- leaves ~70 % full), the btree on forget_at a few bytes: forget_at is
-- rounded up to the whole minute, so equal values are deduplicated into
-- posting lists.  A BRIN index would be smaller still, but its ranges only
-- ever widen when vacuumed space is refilled by newer rows, so after one
-- window every range would match and each batch would scan the table.
--
-- The functions it defined, as they are now: sql/functions/
-- (idem_digest64.sql, idem_key_digest64.sql, idem_forget_at.sql,
-- idem_put.sql, idem_claim.sql, idem_complete.sql, idem_evict_batch.sql,
-- idem_forget_batch.sql), applied by idemctl migrate after the migrations.

ALTER TABLE idempotency_keys
	-- [route] remember in milliseconds when the record was created;
	-- NULL: nothing is kept once it is evicted
	ADD COLUMN remember_ms bigint;

CREATE TABLE idem_remembered (
	key_digest	bigint NOT NULL,	-- idem_key_digest64(tenant, key)
	request_digest	bigint NOT NULL,	-- idem_digest64(fingerprint)
	expired_at	timestamptz NOT NULL,	-- the record's expires_at
	forget_at	timestamptz NOT NULL	-- + remember, up to a minute
);

-- The claim looks a key up here; the janitor evicts from the forget_at end.
CREATE INDEX idem_remembered_key ON idem_remembered (key_digest);
CREATE INDEX idem_remembered_forget_at ON idem_remembered (forget_at);

-- Evicted from the head of forget_at, like the keys' expires_at: vacuum
-- early so that the next batch does not step over dead entries.
ALTER TABLE idem_remembered SET (autovacuum_vacuum_scale_factor = 0.01);
