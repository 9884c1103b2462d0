-- idem_evict_horizon_lower.sql: the function of the trigger (sql/012) that
-- lowers the eviction horizon to a past-dated record; the lock first, so
-- that it waits for an eviction batch that is moving it (and then sees its
-- value).  Once lowered, the horizon stays locked by this transaction until
-- it ends: what it was lowered to is remembered for the transaction (a
-- local setting, undone with a rolled back savepoint as the update is), and
-- a record at or above it costs no statement (a bulk load of past-dated
-- records: about 12 us a record instead of 95).
CREATE OR REPLACE FUNCTION idem_evict_horizon_lower()
RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	v_lo text := current_setting('idem.evict_horizon_lowered', true);
BEGIN
	IF v_lo <> '' AND NEW.created_at >=
	    to_timestamp(split_part(v_lo, ' ', 1)::float8) AND
	    (NEW.state <> 'completed' OR NEW.expires_at >=
	    to_timestamp(split_part(v_lo, ' ', 2)::float8)) THEN
		RETURN NULL;
	END IF;
	PERFORM 1 FROM idem_evict_horizon FOR UPDATE;
	UPDATE idem_evict_horizon SET
	    created_lo = least(created_lo, NEW.created_at - interval '1 day'),
	    expires_lo = CASE WHEN NEW.state = 'completed' THEN
	      least(expires_lo, NEW.expires_at - interval '1 day')
	      ELSE expires_lo END
	  WHERE created_lo > NEW.created_at OR
	    (NEW.state = 'completed' AND expires_lo > NEW.expires_at);
	PERFORM set_config('idem.evict_horizon_lowered',
	    coalesce((SELECT extract(epoch FROM h.created_lo) || ' ' ||
	      extract(epoch FROM h.expires_lo) FROM idem_evict_horizon h), ''),
	    true);
	RETURN NULL;
END
$$;
