-- idem_key_abandon.sql: an operator gives a record up.  It is completed
-- with the stored answer every retry of the key then replays: 500, an RFC
-- 9457 problem of type p_type ("idempotency-key-abandoned" under the app's
-- problem base), saying that the request's effects may be partial and that
-- the key must not be reused for it.  Only an unleased record in progress
-- (a running owner is fenced out by its token: the lease is ended, the
-- token cleared).  Returns its id, or NULL.
CREATE OR REPLACE FUNCTION idem_key_abandon(p_tenant text, p_key text,
    p_type text)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
	UPDATE idempotency_keys k SET state = 'completed',
	    response_status = 500,
	    response_headers = '{"Content-Type": "application/problem+json"}',
	    response_body = convert_to(jsonb_build_object(
	      'type', p_type, 'title', 'Idempotency key abandoned',
	      'status', 500,
	      'detail', 'An operator abandoned this request after it was '
	        'interrupted at ' || k.recovery_point || '; its effects up to '
	        'there may stand. Do not retry it with this key.')::text,
	      'UTF8'),
	    locked_at = NULL, lease_token = NULL, lease_until = NULL,
	    recovery_point = 'finished', attention_at = NULL,
	    attention_reason = 'abandoned', next_attempt_at = NULL
	  FROM idem_key_record(p_tenant, p_key) r
	  WHERE k.id = r.id AND k.state = 'in_progress'
	    AND coalesce(k.lease_until <= now(), true)
	  RETURNING k.id
$$;
