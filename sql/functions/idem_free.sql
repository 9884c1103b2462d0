-- idem_free.sql: may a new request write this key's record in place of k?
-- Only when it is expired and nothing of it can still be running or have
-- effects: completed, or never past 'started' with its lease lapsed.
CREATE OR REPLACE FUNCTION idem_free(k idempotency_keys)
RETURNS boolean
LANGUAGE sql STABLE AS $$
	SELECT k.expires_at <= now() AND (k.state = 'completed' OR
	    (k.recovery_point = 'started' AND
	     coalesce(k.lease_until <= now(), true)))
$$;
