-- idem_completer_take.sql: up to p_limit abandoned records that are due (in
-- progress past a recovery point, lease lapsed, not set aside), taken for
-- one attempt each: attempts counted now (a completer that dies in the
-- attempt has made it) and next_attempt_at moved p_hold_ms ahead, so that
-- no other completer takes them while this one runs them.  The lease is
-- what makes a run exclusive (idem_claim takes a lapsed one over under the
-- key's lock); this only keeps completers from queueing on the same ones.
-- revoked: the tenant's API key was revoked (the run cannot succeed).
CREATE OR REPLACE FUNCTION idem_completer_take(p_limit bigint,
    p_hold_ms bigint)
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
