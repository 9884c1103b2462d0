-- 003_payments_phased.sql: what the phased create (external acquirer)
-- needs.

ALTER TABLE payments
	ADD COLUMN idem_key_id bigint,		-- the key record that created it
	ADD COLUMN acquirer_charge text,	-- the acquirer's charge id
	ADD COLUMN acquirer_status text;	-- approved | declined
-- One payment per key record: a resumed phase 1 cannot insert twice.
CREATE UNIQUE INDEX payments_idem_key ON payments (api_key_id, idem_key_id)
	WHERE idem_key_id IS NOT NULL;

-- The library's index for reclaim and the in-progress gauge was created
-- here; it is the library's, so sql/007_idem_in_progress.sql creates it
-- now (IF NOT EXISTS: a database that ran this file before has it).  A
-- database records a migration by its file name and never runs it twice,
-- so taking the statement out changes only fresh databases, where the
-- library's migrations run first.
