-- 005_idem_fencing.sql: leases with fencing tokens for phased records.
--
-- A phased record in progress is owned by the request that holds its lease:
-- lease_token names the owner, lease_until is when the lease lapses.  Every
-- write by an owner (phase commit, renewal, final store) names its token, in
-- the same statement as the check, and raises when the record is no longer
-- its own, so that the owner's whole transaction, effects included, rolls
-- back.  A record in progress whose lease is live is never replaced, deleted
-- or taken over, whether its expires_at has passed or not.
--
-- The functions it defined, as they are now: sql/functions/ (idem_free.sql,
-- idem_put.sql, idem_claim.sql, idem_fenced_fail.sql, idem_advance.sql,
-- idem_finish.sql, idem_release.sql), applied by idemctl migrate after the
-- migrations.

ALTER TABLE idempotency_keys
	ADD COLUMN lease_token uuid,
	ADD COLUMN lease_until timestamptz,
	-- phased: the canonical request body the fingerprint covers, so that
	-- the completer can run an abandoned record's handler again
	ADD COLUMN request_body bytea;

-- Records leased before this migration keep a lease of the default
-- lock_timeout (5 minutes) from their last renewal.
UPDATE idempotency_keys SET lease_token = gen_random_uuid(),
    lease_until = locked_at + interval '5 minutes'
  WHERE state = 'in_progress' AND locked_at IS NOT NULL;

-- The completer and the unfinished-keys report walk this.
CREATE INDEX idempotency_keys_lease_until ON idempotency_keys (lease_until)
	WHERE state = 'in_progress';
