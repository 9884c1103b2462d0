-- idem_fenced_fail.sql: what every fenced write raises when the record is
-- no longer leased by the caller (taken over, released, completed, gone).
CREATE OR REPLACE FUNCTION idem_fenced_fail(p_id bigint)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'idempotency key record % is no longer leased by this '
	    'request', p_id USING ERRCODE = 'serialization_failure';
END
$$;
