-- ledger.sql: the tables of the ledger example.  Apply it after libidem's
-- own schema (which creates api_keys), e.g.
--   idemctl -c ledger.ini migrate                 (the installed SQL)
--   idemctl -c ledger.ini migrate --dir .         (this file)

CREATE TABLE accounts (
	api_key_id	bigint NOT NULL REFERENCES api_keys (id),
	name		text NOT NULL,
	balance		bigint NOT NULL CHECK (balance >= 0),
	PRIMARY KEY (api_key_id, name)
);
CREATE TABLE transfers (
	id		bigserial PRIMARY KEY,
	api_key_id	bigint NOT NULL REFERENCES api_keys (id),
	idem_key_id	bigint,			-- the key record that made it
	source		text NOT NULL,
	target		text NOT NULL,
	amount		bigint NOT NULL CHECK (amount > 0),
	memo		text,
	status		text NOT NULL CHECK (status IN ('held', 'settled')),
	UNIQUE (api_key_id, idem_key_id)
);
