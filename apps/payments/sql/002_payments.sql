-- 002_payments.sql: the sample payments application.

CREATE TABLE payments (
	id		text PRIMARY KEY,
	api_key_id	bigint NOT NULL REFERENCES api_keys (id),
	seq		bigserial NOT NULL UNIQUE,	-- list order, newest first
	amount		bigint NOT NULL CHECK (amount > 0),
	currency	text NOT NULL CHECK (currency ~ '^[a-z]{3}$'),
	status		text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
	amount_refunded	bigint NOT NULL DEFAULT 0
			CHECK (amount_refunded >= 0 AND amount_refunded <= amount),
	description	text CHECK (length(description) <= 1000),
	customer	text,
	metadata	jsonb NOT NULL DEFAULT '{}',
	created_at	timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX payments_tenant_seq ON payments (api_key_id, seq DESC);

CREATE TABLE refunds (
	id		text PRIMARY KEY,
	payment_id	text NOT NULL REFERENCES payments (id),
	api_key_id	bigint NOT NULL REFERENCES api_keys (id),
	amount		bigint NOT NULL CHECK (amount > 0),
	created_at	timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX refunds_payment ON refunds (payment_id);
