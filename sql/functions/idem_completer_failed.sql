-- idem_completer_failed.sql: the completer's attempt at record p_id did not
-- complete it: the error kept, the next attempt p_delay_ms from now, or,
-- with p_giveup (the reason: hopeless, max_attempts, max_age), the record
-- set aside for an operator.  Only while it is still in progress and not
-- leased (a client's retry may own it by now).  Returns whether it was set
-- aside.
CREATE OR REPLACE FUNCTION idem_completer_failed(p_id bigint, p_error text,
    p_delay_ms bigint, p_giveup text)
RETURNS boolean
LANGUAGE sql VOLATILE AS $$
	UPDATE idempotency_keys k SET last_error = left(p_error, 500),
	    next_attempt_at = now() + p_delay_ms * interval '1 millisecond',
	    attention_at = CASE WHEN p_giveup IS NOT NULL THEN now() END,
	    attention_reason = p_giveup
	  WHERE k.id = p_id AND k.state = 'in_progress'
	    AND coalesce(k.lease_until <= now(), true)
	  RETURNING k.attention_at IS NOT NULL
$$;
