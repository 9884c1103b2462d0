-- idem_forget_at.sql: when a trace of a record that expired at p_expired is
-- forgotten: the window later, rounded up to the whole minute (equal values
-- share one index entry).
CREATE OR REPLACE FUNCTION idem_forget_at(p_expired timestamptz,
    p_remember_ms bigint)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
	SELECT to_timestamp(ceil(extract(epoch FROM p_expired +
	    p_remember_ms * interval '1 millisecond') / 60) * 60)
$$;
