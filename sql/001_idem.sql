-- 001_idem.sql: the idempotency store and the tenants it is scoped by.

CREATE TABLE api_keys (
	id		bigserial PRIMARY KEY,
	name		text NOT NULL,
	-- SHA-256 of the secret; the secret itself is never stored.
	secret_hash	bytea NOT NULL UNIQUE CHECK (length(secret_hash) = 32),
	created_at	timestamptz NOT NULL DEFAULT now(),
	revoked_at	timestamptz
);

CREATE TABLE idempotency_keys (
	id			bigserial PRIMARY KEY,
	api_key_id		bigint NOT NULL REFERENCES api_keys (id),
	key			text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
	request_method		text NOT NULL,
	request_path		text NOT NULL,
	request_fingerprint	bytea NOT NULL CHECK (length(request_fingerprint) = 32),
	state			text NOT NULL CHECK (state IN ('in_progress', 'completed')),
	-- phased handlers: the last phase committed ('started' before any)
	recovery_point		text NOT NULL DEFAULT 'started',
	response_status		integer,
	response_headers	jsonb,
	response_body		bytea,
	locked_at		timestamptz,
	created_at		timestamptz NOT NULL DEFAULT now(),
	expires_at		timestamptz NOT NULL,
	UNIQUE (api_key_id, key),
	CHECK (state <> 'completed' OR response_status IS NOT NULL)
);

-- Eviction walks this index in bounded batches.
CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);
