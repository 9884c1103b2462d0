-- 020_idem_tenant_refs.sql: the key records and events refer to their API
-- key without locking its row.
--
-- A foreign key checks a new row with SELECT ... FOR KEY SHARE on the row
-- it refers to.  Every create of a tenant refers to the same api_keys row
-- (the key record, the event, the application's own row), so concurrent
-- creates of one tenant lock one row together, and each lock makes a new
-- MultiXact of all its holders (SLRU pages, WAL records, the row's page
-- locked and dirtied by every create in turn): creates without those
-- checks cost PostgreSQL 100-180 us less at 8 clients (pgbench of
-- tests/bench/create.sql, durable), and with the check below instead,
-- 20-30 us less in 8 sessions writing a create's rows (docs/benchmark.md).
--
-- What the lock guards is that the API key cannot be deleted, or its id
-- changed, before the row that refers to it commits.  API keys are never
-- deleted (idemctl revokes them: revoked_at), so that is now a rule of
-- api_keys itself: it refuses DELETE, TRUNCATE and a change of id.  A row
-- of idempotency_keys or idem_events checks, when written, that its
-- api_key_id names an API key (idem_tenant_exists(): a lookup by the
-- primary key, no lock).  An API key that exists can never stop existing,
-- so every api_key_id names an API key for as long as the row lives, as
-- the foreign keys ensured (tests/direct/tenant_refs.py).
--
-- The functions' bodies are sql/functions/idem_tenant_exists.sql and
-- idem_api_key_kept.sql, applied by idemctl migrate after the migrations,
-- in the same transaction; here, placeholders that the triggers can name.

CREATE FUNCTION idem_tenant_exists()
RETURNS trigger
LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE FUNCTION idem_api_key_kept()
RETURNS trigger
LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;

CREATE TRIGGER idem_api_key_kept
	BEFORE DELETE OR UPDATE OF id ON api_keys
	FOR EACH ROW EXECUTE FUNCTION idem_api_key_kept();
CREATE TRIGGER idem_api_key_kept_truncate
	BEFORE TRUNCATE ON api_keys
	FOR EACH STATEMENT EXECUTE FUNCTION idem_api_key_kept();

ALTER TABLE idempotency_keys
	DROP CONSTRAINT idempotency_keys_api_key_id_fkey;
CREATE TRIGGER idem_tenant_exists
	BEFORE INSERT OR UPDATE OF api_key_id ON idempotency_keys
	FOR EACH ROW EXECUTE FUNCTION idem_tenant_exists();

ALTER TABLE idem_events
	DROP CONSTRAINT idem_events_api_key_id_fkey;
CREATE TRIGGER idem_tenant_exists
	BEFORE INSERT OR UPDATE OF api_key_id ON idem_events
	FOR EACH ROW EXECUTE FUNCTION idem_tenant_exists();
