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

-- idem_completer_take: up to p_limit abandoned records that are due (in
-- progress past a recovery point, lease lapsed, not set aside), taken for
-- one attempt each: attempts counted now (a completer that dies in the
-- attempt has made it) and next_attempt_at moved p_hold_ms ahead, so that
-- no other completer takes them while this one runs them.  The lease is
-- what makes a run exclusive (idem_claim takes a lapsed one over under the
-- key's lock); this only keeps completers from queueing on the same ones.
-- revoked: the tenant's API key was revoked (the run cannot succeed).
CREATE FUNCTION idem_completer_take(p_limit bigint, p_hold_ms bigint)
RETURNS TABLE (id bigint, request_method text, request_path text, key text,
    secret_hash bytea, request_body bytea, revoked boolean,
    attempts integer, age_ms bigint)
LANGUAGE sql VOLATILE AS $$
	WITH due AS (
		SELECT k.id FROM idempotency_keys k
		WHERE k.state = 'in_progress' AND k.recovery_point <> 'started'
		  AND k.attention_at IS NULL AND k.request_body IS NOT NULL
		  AND coalesce(k.lease_until <= now(), true)
		  AND coalesce(k.next_attempt_at <= now(), true)
		ORDER BY k.next_attempt_at NULLS FIRST, k.id
		LIMIT p_limit
		FOR UPDATE OF k SKIP LOCKED)
	UPDATE idempotency_keys k SET attempts = k.attempts + 1,
	    next_attempt_at = now() + p_hold_ms * interval '1 millisecond'
	  FROM due, api_keys a
	  WHERE k.id = due.id AND a.id = k.api_key_id
	  RETURNING k.id, k.request_method, k.request_path, k.key,
	    a.secret_hash, k.request_body, a.revoked_at IS NOT NULL,
	    k.attempts,
	    (extract(epoch FROM now() - k.created_at) * 1000)::bigint
$$;

-- idem_completer_failed: the completer's attempt at record p_id did not
-- complete it: the error kept, the next attempt p_delay_ms from now, or,
-- with p_giveup (the reason: hopeless, max_attempts, max_age), the record
-- set aside for an operator.  Only while it is still in progress and not
-- leased (a client's retry may own it by now).  Returns whether it was set
-- aside.
CREATE FUNCTION idem_completer_failed(p_id bigint, p_error text,
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

-- idem_key_record: the record of (tenant, key) for an operator; tenant is
-- the API key's name or its id.
CREATE FUNCTION idem_key_record(p_tenant text, p_key text)
RETURNS SETOF idempotency_keys
LANGUAGE sql STABLE AS $$
	SELECT k.* FROM idempotency_keys k JOIN api_keys a
	    ON a.id = k.api_key_id
	  WHERE (a.name = p_tenant OR a.id::text = p_tenant) AND k.key = p_key
$$;

-- idem_key_retry: an operator puts a record back in the completer's queue,
-- due now, its attempts counted afresh.  Only an unfinished, unleased
-- record.  Returns its id, or NULL.
CREATE FUNCTION idem_key_retry(p_tenant text, p_key text)
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

-- idem_key_abandon: an operator gives a record up.  It is completed with
-- the stored answer every retry of the key then replays: 500, an RFC 9457
-- problem of type p_type ("idempotency-key-abandoned" under the app's
-- problem base), saying that the request's effects may be partial and
-- that the key must not be reused for it.  Only an unleased record in
-- progress (a running owner is fenced out by its token: the lease is
-- ended, the token cleared).  Returns its id, or NULL.
CREATE FUNCTION idem_key_abandon(p_tenant text, p_key text, p_type text)
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

-- The needs-attention count for /metrics and idemctl stats (partial index).
CREATE FUNCTION idem_attention_count()
RETURNS bigint
LANGUAGE sql STABLE AS $$
	SELECT count(*) FROM idempotency_keys k
	  WHERE k.state = 'in_progress' AND k.attention_at IS NOT NULL
$$;
