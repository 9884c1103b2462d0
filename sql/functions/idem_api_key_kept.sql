-- idem_api_key_kept.sql: the trigger (sql/020) that keeps every API key:
-- DELETE, TRUNCATE and a change of id are refused (revoke a key instead:
-- idemctl api-key revoke).  The rows that refer to an API key check it
-- only when written (idem_tenant_exists), without a lock: this is what
-- keeps their reference valid afterwards.
CREATE OR REPLACE FUNCTION idem_api_key_kept()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'UPDATE' AND NEW.id = OLD.id THEN
		RETURN NEW;
	END IF;
	RAISE EXCEPTION 'API keys are never deleted nor renumbered (% on api_keys)', TG_OP
	    USING ERRCODE = 'restrict_violation',
	    HINT = 'Revoke the key instead: idemctl api-key revoke.';
END
$$;
