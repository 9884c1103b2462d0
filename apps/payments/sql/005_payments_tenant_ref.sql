-- 005_payments_tenant_ref.sql: a payment refers to its API key as the
-- library's key records and events do (sql/020_idem_tenant_refs.sql):
-- checked when written (idem_tenant_exists()), without the row lock of a
-- foreign key, which every create of a tenant took on the same api_keys
-- row.  API keys are never deleted nor renumbered (sql/020), so the
-- reference stays valid.  Refunds keep their foreign key: a refund is
-- rare, and it refers to the payment too.

ALTER TABLE payments
	DROP CONSTRAINT payments_api_key_id_fkey;
CREATE TRIGGER payments_tenant_exists
	BEFORE INSERT OR UPDATE OF api_key_id ON payments
	FOR EACH ROW EXECUTE FUNCTION idem_tenant_exists();
