-- 007_idem_in_progress.sql: the index for reclaim and the in-progress
-- gauge, which the sample application's 003_payments_phased.sql used to
-- create.  IF NOT EXISTS: databases migrated before have it already.

CREATE INDEX IF NOT EXISTS idempotency_keys_in_progress
	ON idempotency_keys (locked_at) WHERE state = 'in_progress';
