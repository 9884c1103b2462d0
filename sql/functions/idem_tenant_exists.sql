-- idem_tenant_exists.sql: the trigger (sql/020) that stands for a foreign
-- key to api_keys: the row's api_key_id must name an API key.  A lookup,
-- without the row lock a foreign key takes: an API key is never deleted
-- nor its id changed (idem_api_key_kept), so one that exists now exists
-- when this transaction commits, and for as long as the row lives.
CREATE OR REPLACE FUNCTION idem_tenant_exists()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM FROM api_keys a WHERE a.id = NEW.api_key_id;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'insert or update on table "%" violates its reference to api_keys',
		    TG_TABLE_NAME
		    USING ERRCODE = 'foreign_key_violation',
		    DETAIL = format('Key (api_key_id)=(%s) is not present in table "api_keys".',
		      NEW.api_key_id);
	END IF;
	RETURN NEW;
END
$$;
