-- hello.sql: the table of the hello example.  Apply it after libidem's
-- own schema (which creates api_keys), e.g.
--   idemctl -c hello.ini migrate --dir PREFIX/share/idem/sql --dir .
-- (libidem's schema, then this file; without --dir idemctl applies the
-- library's and the sample payments application's.)
-- idemctl records each file by name and applies it only once.

CREATE TABLE greetings (
	id		bigserial PRIMARY KEY,
	api_key_id	bigint NOT NULL REFERENCES api_keys (id),
	name		text NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
	created_at	timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX greetings_tenant ON greetings (api_key_id);
