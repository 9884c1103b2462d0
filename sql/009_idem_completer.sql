-- 009_idem_completer.sql: a completer that cannot be starved.
--
-- Each abandoned phased record carries its own retry schedule: attempts
-- made by completers, the last error, when it is due again (exponential
-- backoff with jitter, computed by the completer, lib/backoff.c).  A
-- completer takes the records that are due, oldest schedule first, with
-- FOR UPDATE SKIP LOCKED (no fleet-wide lock: two completers take
-- different records), so a record that keeps failing yields to the others.
-- A record that cannot succeed (its tenant revoked, its route gone, too
-- many attempts, too old) is set aside as needing attention: the completer
-- no longer takes it, idem_keys_attention counts it, and an operator
-- retries (idem_key_retry) or abandons it (idem_key_abandon).
--
-- The functions it defined, as they are now: sql/functions/
-- (idem_completer_take.sql, idem_completer_failed.sql, idem_key_record.sql,
-- idem_key_retry.sql, idem_key_abandon.sql, idem_attention_count.sql),
-- applied by idemctl migrate after the migrations.

ALTER TABLE idempotency_keys
	ADD COLUMN attempts integer NOT NULL DEFAULT 0,
	ADD COLUMN last_error text,
	ADD COLUMN next_attempt_at timestamptz,
	-- set: needs an operator (why: attention_reason); the completer skips it
	ADD COLUMN attention_at timestamptz,
	ADD COLUMN attention_reason text;

-- What a completer takes: abandoned records, in their schedule's order.
CREATE INDEX idempotency_keys_completer ON idempotency_keys
	(next_attempt_at NULLS FIRST, id)
	WHERE state = 'in_progress' AND recovery_point <> 'started'
	  AND attention_at IS NULL;

-- The gauge and idemctl stats count these.
CREATE INDEX idempotency_keys_attention ON idempotency_keys (attention_at)
	WHERE state = 'in_progress' AND attention_at IS NOT NULL;
