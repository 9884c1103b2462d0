-- 003_payments_phased.sql: what the phased create (external acquirer)
-- needs, and an index for reclaim and the in-progress gauge.

ALTER TABLE payments
	ADD COLUMN idem_key_id bigint,		-- the key record that created it
	ADD COLUMN acquirer_charge text,	-- the acquirer's charge id
	ADD COLUMN acquirer_status text;	-- approved | declined
-- One payment per key record: a resumed phase 1 cannot insert twice.
CREATE UNIQUE INDEX payments_idem_key ON payments (api_key_id, idem_key_id)
	WHERE idem_key_id IS NOT NULL;

CREATE INDEX idempotency_keys_in_progress ON idempotency_keys (locked_at)
	WHERE state = 'in_progress';
