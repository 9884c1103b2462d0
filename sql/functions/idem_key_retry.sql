-- idem_key_retry.sql: an operator puts a record back in the completer's
-- queue, due now, its attempts counted afresh.  Only an unfinished,
-- unleased record.  Returns its id, or NULL.
CREATE OR REPLACE FUNCTION idem_key_retry(p_tenant text, p_key text)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
	UPDATE idempotency_keys k SET attention_at = NULL,
	    attention_reason = NULL, attempts = 0, next_attempt_at = NULL
	  FROM idem_key_record(p_tenant, p_key) r
	  WHERE k.id = r.id AND k.state = 'in_progress'
	    AND k.recovery_point <> 'started'
	    AND coalesce(k.lease_until <= now(), true)
	  RETURNING k.id
$$;
