#!/usr/bin/env python3
"""tenant_refs.py - the key records, events and payments refer to their
API key without locking its row (sql/020_idem_tenant_refs.sql,
apps/payments/sql/005_payments_tenant_ref.sql), and the reference holds as
the foreign keys made it hold, on a database of its own:
 1. a row of idempotency_keys, idem_events or payments whose api_key_id
    names no API key is refused (foreign_key_violation), on INSERT and on
    UPDATE of api_key_id;
 2. a create's rows, written and not yet committed, hold no lock on the
    API key's row: another session locks it FOR UPDATE NOWAIT (a foreign
    key's FOR KEY SHARE made that fail, and made every concurrent create
    of the tenant a new MultiXact of that row);
 3. an API key cannot go away: DELETE, TRUNCATE and a new id are refused
    (restrict_violation); revoking it (revoked_at) still works.
Prints TAP.  Usage:
  tenant_refs.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import run_main, remove_tmp, scratch, api_key, conf_text, done, check, run_args, write  # noqa: E402

FPR = "'\\x%s'::bytea" % ("ab" * 32)


def sqlstate(d, q):
    """The SQLSTATE of Q (None when it succeeds), psql's VERBOSITY verbose
    message carrying it."""
    p = subprocess.run(d.base + ["-d", d.name, "-v", "VERBOSITY=verbose",
                                 "-c", q], capture_output=True, text=True)
    if p.returncode == 0:
        return None
    m = re.search(r"ERROR:\s+([0-9A-Z]{5}):", p.stderr)
    return m.group(1) if m else p.stderr


def key_row(tenant, key):
    return ("INSERT INTO idempotency_keys (api_key_id, key, request_method, "
            "request_path, request_fingerprint, state, response_status, "
            "expires_at) VALUES (%s, '%s', 'POST', '/v1/payments', %s, "
            "'completed', 201, now() + interval '1 day')" % (tenant, key, FPR))


def event_row(tenant, eid):
    return ("INSERT INTO idem_events (event_id, api_key_id, type, body) "
            "VALUES ('%s', %s, 'payment.succeeded', '{}')" % (eid, tenant))


def payment_row(tenant, pid):
    return ("INSERT INTO payments (id, api_key_id, amount, currency, status) "
            "VALUES ('%s', %s, 1234, 'eur', 'succeeded')" % (pid, tenant))


def main():
    a = run_args()
    tmp, d = scratch(a, "tenant_refs")
    name = d.name
    holder = None
    try:
        conf = os.path.join(tmp, "app.ini")
        write(conf, conf_text(a.pghost, a.pgport, name, ""))
        api_key(a.builddir, a.srcdir, conf, "refs")
        tenant = d.sql("SELECT max(id) FROM api_keys")
        nobody = d.sql("SELECT max(id) + 1000 FROM api_keys")

        # --- 1. a reference to no API key is refused -------------------
        for what, q in (("a key record", key_row(nobody, "k-orphan")),
                        ("an event", event_row(nobody, "evt_orphan")),
                        ("a payment", payment_row(nobody, "pay_orphan"))):
            check.expect(sqlstate(d, q) == "23503", "%s of no API key is refused "
               "(foreign_key_violation)" % what, sqlstate(d, q))
        d.sql(key_row(tenant, "k-1") + "; " + event_row(tenant, "evt_1") +
              "; " + payment_row(tenant, "pay_1"))
        for table, where in (("idempotency_keys", "key = 'k-1'"),
                             ("idem_events", "event_id = 'evt_1'"),
                             ("payments", "id = 'pay_1'")):
            st = sqlstate(d, "UPDATE %s SET api_key_id = %s WHERE %s"
                          % (table, nobody, where))
            check.expect(st == "23503", "%s: an update to no API key is refused"
               % table, st)
        check.expect(d.sql("SELECT count(*) FROM idempotency_keys k JOIN idem_events e "
                 "USING (api_key_id) JOIN payments p USING (api_key_id) "
                 "WHERE api_key_id = %s" % tenant) == "1",
           "the rows of an API key that exists are written")

        # --- 2. no lock on the API key's row ---------------------------
        holder = subprocess.Popen(d.base + ["-d", d.name], text=True,
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)
        holder.stdin.write("BEGIN;\n%s;\n%s;\n%s;\nSELECT 'written';\n" %
                           (key_row(tenant, "k-2"), event_row(tenant, "evt_2"),
                            payment_row(tenant, "pay_2")))
        holder.stdin.flush()
        written = holder.stdout.readline().strip()
        st = sqlstate(d, "SET lock_timeout = '1s'; BEGIN; SELECT id FROM "
                         "api_keys WHERE id = %s FOR UPDATE NOWAIT; ROLLBACK"
                      % tenant)
        check.expect(written == "written" and st is None, "a create's rows, not yet "
           "committed, leave the API key's row unlocked (FOR UPDATE NOWAIT "
           "from another session)", (written, st))
        try:
            holder.stdin.write("COMMIT;\n")
            holder.stdin.close()
        except BrokenPipeError:
            pass
        holder.wait(timeout=10)
        holder = None
        check.expect(d.sql("SELECT count(*) FROM idempotency_keys") == "2",
           "that create commits")
        # --- 3. an API key cannot go away ------------------------------
        for what, q in (("DELETE", "DELETE FROM api_keys WHERE id = %s"
                         % tenant),
                        ("TRUNCATE", "TRUNCATE api_keys CASCADE"),
                        ("a new id", "UPDATE api_keys SET id = %s WHERE "
                         "id = %s" % (nobody, tenant))):
            check.expect(sqlstate(d, q) == "23001", "%s of api_keys is refused "
               "(restrict_violation)" % what, sqlstate(d, q))
        check.expect(d.sql("SELECT count(*) FROM api_keys WHERE id = %s" % tenant) ==
           "1" and d.sql("SELECT count(*) FROM idempotency_keys") == "2",
           "the API key and its rows are still there")
        check.expect(sqlstate(d, "UPDATE api_keys SET revoked_at = now() WHERE "
                       "id = %s" % tenant) is None and
           d.sql("SELECT revoked_at IS NOT NULL FROM api_keys WHERE id = %s"
                 % tenant) == "t", "revoking an API key still works")
        d.sql("UPDATE api_keys SET revoked_at = NULL WHERE id = %s" % tenant)

    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
        remove_tmp(tmp, d)
    done()


if __name__ == "__main__":
    main()
