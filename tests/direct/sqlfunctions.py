#!/usr/bin/env python3
"""sqlfunctions.py - sql/functions/ (one file per SQL function, applied by
idemctl migrate after the numbered migrations) against databases of its
own:
 1. upgrade: a database migrated by the tree of BASE (the last one whose
    numbered migrations defined the functions), holding records, then
    migrated by this tree, ends with the same functions (their
    definitions), tables, columns, indexes, constraints and triggers as a
    database migrated by this tree from nothing; the records are kept and
    the regress programs that need a migrated store pass on it;
 2. the functions of a migrated database are the files: each file creates
    one function named as the file, with the file's body, and no idem_
    function of the database lacks a file;
 3. migrate again changes nothing; a function file that fails rolls back
    the migrations of its run; a LANGUAGE sql body is checked once every
    function exists.
Prints TAP.  Usage:
  sqlfunctions.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import run_main, Db, conf_text, done, missing, check, write  # noqa: E402

# The tree before sql/functions/ existed: its numbered migrations define,
# drop and redefine the functions.
BASE = "af7e0cf"
UPGRADE, FRESH, SCRATCH = "idem_sqlfn_upgrade", "idem_sqlfn_fresh", \
    "idem_sqlfn_scratch"
REGRESS = ["r_create", "r_replay", "r_resume", "r_remember", "r_outbox"]

# What two databases must agree on, each a list of text rows.
SCHEMA = {
    "functions": "SELECT p.oid::regprocedure::text || ' ' || "
                 "replace(pg_get_functiondef(p.oid), E'\\n', '\\n') "
                 "FROM pg_proc p "
                 "WHERE p.pronamespace = 'public'::regnamespace ORDER BY 1",
    "columns": "SELECT table_name || '.' || column_name || ' ' || "
               "data_type || ' ' || is_nullable || ' ' || "
               "coalesce(column_default, '') FROM information_schema.columns "
               "WHERE table_schema = 'public' ORDER BY 1",
    "indexes": "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' "
               "ORDER BY 1",
    "constraints": "SELECT conrelid::regclass || ' ' || conname || ' ' || "
                   "pg_get_constraintdef(oid) FROM pg_constraint "
                   "WHERE connamespace = 'public'::regnamespace ORDER BY 1",
    "triggers": "SELECT pg_get_triggerdef(oid) FROM pg_trigger "
                "WHERE NOT tgisinternal ORDER BY 1",
    "table options": "SELECT relname || ' ' || coalesce(array_to_string("
                     "reloptions, ','), '') FROM pg_class WHERE "
                     "relnamespace = 'public'::regnamespace AND relkind = 'r' "
                     "ORDER BY 1",
}


def schema(db, name):
    return {k: db.sql(q, name).split("\n") for k, q in SCHEMA.items()}


def migrate(ctl, conf, *dirs):
    args = [ctl, "-c", conf, "migrate"]
    for d in dirs:
        args += ["--dir", d]
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def fresh_db(db, name):
    db.sql("DROP DATABASE IF EXISTS %s" % name, "postgres")
    db.sql("CREATE DATABASE %s" % name, "postgres")


def old_tree(srcdir, tmp):
    """BASE's sql/ and apps/payments/sql/ under tmp, or None.  The history
    is srcdir's, or that of $IDEM_GIT_SOURCE: the checkout a copy of the
    tree was made from (scripts/sanitize builds a copy without .git)."""
    for where in (srcdir, os.environ.get("IDEM_GIT_SOURCE")):
        if not where:
            continue
        git = subprocess.run(["git", "-C", where, "archive", BASE, "sql",
                              "apps/payments/sql"], capture_output=True)
        if git.returncode == 0:
            break
    else:
        return None
    os.makedirs(tmp)
    subprocess.run(["tar", "-x", "-C", tmp], input=git.stdout, check=True)
    return tmp


def file_function(path):
    """(name, body) of the one function a file creates."""
    text = open(path).read()
    heads = re.findall(r"(?m)^CREATE OR REPLACE FUNCTION (\w+)\(", text)
    body = re.search(r"(?s)\$\$(.*)\$\$;", text)
    if len(heads) != 1 or body is None or \
            len(re.findall(r"(?m)^CREATE ", text)) != 1:
        return None, None
    return heads[0], body.group(1)


def check_files(db, name, fdir):
    """Each file's function is in database name with the file's body; no
    idem_ function of the database lacks a file."""
    files = sorted(glob.glob(os.path.join(fdir, "*.sql")))
    bad, names = [], set()
    for f in files:
        fn, body = file_function(f)
        base = os.path.basename(f)[:-4]
        if fn != base:
            bad.append("%s: creates %s, not one function named %s" %
                       (base, fn, base))
            continue
        names.add(fn)
        got = db.sql("SELECT count(*) || ' ' || bool_and(prosrc = $q$%s$q$) "
                     "FROM pg_proc WHERE proname = '%s' AND pronamespace = "
                     "'public'::regnamespace" % (body, fn), name)
        if got != "1 true":
            bad.append("%s: %s (count, same body)" % (fn, got))
    check.expect(files and not bad, "%s: the %d files of sql/functions each create "
                 "one function named as the file, in the database with the file's "
                 "body" % (name, len(files)), "\n".join(bad))
    extra = [n for n in db.sql(
        "SELECT proname FROM pg_proc WHERE pronamespace = "
        "'public'::regnamespace AND proname LIKE 'idem\\_%' ORDER BY 1",
        name).split("\n") if n and n not in names]
    check.expect(not extra, "%s: no idem_ function of the database lacks a file "
                 "in sql/functions" % name, extra)


def seed(db, name, ctl, conf):
    """Records of the old schema: a tenant, a completed key of a
    remembering route, a phased record in progress, an event."""
    out = subprocess.run([ctl, "-c", conf, "api-key", "create", "upgrade"],
                         capture_output=True, text=True, check=True).stdout
    db.sql("SELECT idem_complete(1, 'k-done', 'POST', '/v1/payments', "
           "sha256('a'), 3600000, 201, '{}', 'done', 60000); "
           "SELECT idem_put(1, 'k-run', 'POST', '/v1/payments', sha256('b'), "
           "3600000, 'in_progress', NULL, NULL, NULL, 60000, 'req', "
           "gen_random_uuid()); "
           "SELECT idem_outbox_enqueue('evt_1', 1, 'payment.created', '{}')",
           name)
    return out.strip().splitlines()[-1]


def added_migrations(old, new, rel):
    """The numbered migrations of directory REL (sql or
    apps/payments/sql) of tree NEW that BASE's tree OLD does not have."""
    had = set(os.listdir(os.path.join(old, rel)))
    return [f for f in os.listdir(os.path.join(new, rel))
            if f.endswith(".sql") and f not in had]


def upgrade(db, args, tmp, base_ctl, ctl, new_dirs):
    old = old_tree(args.srcdir, os.path.join(tmp, "base"))
    if old is None:
        missing("upgrade from %s's migrations" % BASE,
                "no git history with %s in %s" % (BASE, args.srcdir))
        return
    conf = os.path.join(tmp, "upgrade.ini")
    write(conf, conf_text(args.pghost, args.pgport, UPGRADE, ""))
    fresh_db(db, UPGRADE)
    rc, out = migrate(base_ctl, conf, os.path.join(old, "sql"),
                      os.path.join(old, "apps/payments/sql"))
    check.expect(rc == 0 and not os.path.isdir(os.path.join(old, "sql/functions")),
                 "%s's tree (no sql/functions) migrates a database" % BASE, out)
    seed(db, UPGRADE, ctl, conf)
    before = db.sql("SELECT count(*) FROM idempotency_keys", UPGRADE)
    rc, out = migrate(ctl, conf, *new_dirs)
    # Numbered migrations added since BASE (sql/015, the sample's 004...)
    # apply; those BASE had do not run again.
    added = [len(set(map(os.path.basename, glob.glob(os.path.join(d,
             "[0-9]*.sql")))) - set(map(os.path.basename, glob.glob(
                 os.path.join(old, o, "[0-9]*.sql")))))
             for d, o in zip(new_dirs, ("sql", "apps/payments/sql"))]
    check.expect(rc == 0 and all(re.search(r"(?m)^%d migrations? applied from %s$"
                                 % (n, re.escape(d)), out)
                       for n, d in zip(added, new_dirs)),
       "then this tree's migrate succeeds, applying only the numbered "
       "migrations added since %s (%s)" % (BASE, added), out)
    got, want = schema(db, UPGRADE), schema(db, FRESH)
    for k in SCHEMA:
        diff = sorted(set(got[k]) ^ set(want[k]))
        check.expect(got[k] == want[k] and got[k] != [""],
                     "upgraded and fresh databases have the same %s (%d)" %
                     (k, len(want[k])), "\n".join(d[:300] for d in diff[:6]))
    check.expect(db.sql("SELECT count(*) FROM idempotency_keys", UPGRADE) == before ==
                 "2", "the upgrade keeps the records (2)", before)
    check.expect(db.sql("SELECT state || ' ' || recovery_point || ' ' || "
                        "(remember_ms = 60000) FROM idempotency_keys "
                        "WHERE key = 'k-done'", UPGRADE) == "completed finished true",
                 "a record completed before the upgrade is read as it was")
    # The trigger's function is the file's, not 012's placeholder.
    db.sql("INSERT INTO idempotency_keys (api_key_id, key, request_method, "
           "request_path, request_fingerprint, state, response_status, "
           "created_at, expires_at) VALUES (1, 'k-past', 'POST', '/x', "
           "sha256('c'), 'completed', 200, now() - interval '3 days', "
           "now() - interval '2 days')", UPGRADE)
    check.expect(db.sql("SELECT created_lo < now() - interval '3 days' FROM "
                        "idem_evict_horizon", UPGRADE) == "t",
                 "upgraded: a past-dated record lowers the eviction horizon "
                 "(the trigger's function from sql/functions)")
    check_files(db, UPGRADE, os.path.join(args.srcdir, "sql/functions"))
    regress(args, UPGRADE)


def regress(args, name):
    conninfo = "host=%s port=%s dbname=%s user=postgres" % (
        args.pghost, args.pgport, name)
    for r in REGRESS:
        prog = os.path.join(args.builddir, "tests/regress", r)
        if not os.access(prog, os.X_OK):
            missing("regress/%s on the upgraded database" % r,
                    "%s not built (make check)" % prog)
            continue
        p = subprocess.run([prog], capture_output=True, text=True,
                           timeout=120,
                           env=dict(os.environ,
                                    IDEM_REGRESS_CONNINFO=conninfo))
        n = len(re.findall(r"(?m)^ok ", p.stdout))
        check.expect(p.returncode == 0 and n > 0 and
                     not re.search(r"(?m)^not ok", p.stdout),
                     "regress/%s passes on the upgraded database (%d checks)" % (r, n),
                     (p.stdout + p.stderr)[-1500:])


def atomic(db, args, tmp, ctl):
    """A run's migrations and functions commit together, or not at all."""
    sql = os.path.join(tmp, "scratch-sql")
    shutil.copytree(os.path.join(args.srcdir, "sql"), sql)
    conf = os.path.join(tmp, "scratch.ini")
    write(conf, conf_text(args.pghost, args.pgport, SCRATCH, ""))
    fresh_db(db, SCRATCH)
    rc, out = migrate(ctl, conf, sql)
    check.expect(rc == 0, "scratch: this tree's sql/ migrates", out)
    write(os.path.join(sql, "999_later.sql"),
          "CREATE TABLE idem_later (id int);\n")
    broken = os.path.join(sql, "functions", "idem_zz_broken.sql")
    write(broken, "CREATE OR REPLACE FUNCTION idem_zz_broken()\n"
          "RETURNS bigint\nLANGUAGE sql STABLE AS $$\n"
          "\tSELECT count(*) FROM idem_no_such_table\n$$;\n")
    rc, out = migrate(ctl, conf, sql)
    check.expect(rc == 1 and "idem_zz_broken.sql" in out and
                 db.sql("SELECT to_regclass('idem_later') IS NULL AND NOT EXISTS "
                        "(SELECT 1 FROM idem_migrations WHERE name = "
                        "'999_later.sql')", SCRATCH) == "t",
                 "a function whose LANGUAGE sql body names a missing table fails "
                 "migrate, naming its file, and the run's migration is rolled back",
                 out)
    write(broken, "CREATE OR REPLACE FUNCTION idem_zz_broken()\n"
          "RETURNS bigint\nLANGUAGE sql STABLE AS $$\n"
          "\tSELECT count(*) FROM idem_later\n$$;\n")
    rc, out = migrate(ctl, conf, sql)
    check.expect(rc == 0 and "1 migration applied" in out and
                 db.sql("SELECT idem_zz_broken()", SCRATCH) == "0",
                 "fixed, the next migrate applies the migration and then the "
                 "function that reads its table", out)
    signature_change(db, sql, conf, ctl)


def signature_change(db, sql, conf, ctl):
    """A new signature needs the old one dropped, by a numbered migration
    that commits with the file (a new return type is refused otherwise,
    new arguments would leave an overload: check_files counts them)."""
    fn = os.path.join(sql, "functions", "idem_zz_broken.sql")
    write(fn, "CREATE OR REPLACE FUNCTION idem_zz_broken()\n"
          "RETURNS text\nLANGUAGE sql STABLE AS $$\n\tSELECT 'x'\n$$;\n")
    rc, out = migrate(ctl, conf, sql)
    check.expect(rc == 1 and "idem_zz_broken.sql" in out,
                 "a file that changes a function's return type alone fails migrate",
                 out)
    write(os.path.join(sql, "998_sig.sql"),
          "DROP FUNCTION idem_zz_broken();\n")
    write(fn, "CREATE OR REPLACE FUNCTION idem_zz_broken(p bigint)\n"
          "RETURNS text\nLANGUAGE sql STABLE AS $$\n\tSELECT p::text\n$$;\n")
    rc, out = migrate(ctl, conf, sql)
    got = db.sql("SELECT string_agg(oid::regprocedure::text || ' ' || "
                 "prorettype::regtype::text, ',') FROM pg_proc WHERE "
                 "proname = 'idem_zz_broken'", SCRATCH)
    check.expect(rc == 0 and got == "idem_zz_broken(bigint) text" and
                 db.sql("SELECT idem_zz_broken(7)", SCRATCH) == "7",
                 "with a migration dropping the old signature it applies: only the "
                 "new signature is left", "%s\n%s" % (out, got))


def main():
    ap = argparse.ArgumentParser()
    for a in ("--builddir", "--srcdir", "--pghost", "--pgport"):
        ap.add_argument(a, required=True)
    # BASE's own idemctl, if at hand (this one migrates BASE's tree alike:
    # it has no sql/functions)
    ap.add_argument("--base-idemctl")
    args = ap.parse_args()
    ctl = os.path.join(args.builddir, "apps/idemctl/idemctl")
    db = Db(args.pghost, args.pgport, FRESH)
    tmp = tempfile.mkdtemp(prefix="idem-sqlfn-")
    new_dirs = [os.path.join(args.srcdir, "sql"),
                os.path.join(args.srcdir, "apps/payments/sql")]
    fdir = os.path.join(args.srcdir, "sql/functions")
    try:
        conf = os.path.join(tmp, "fresh.ini")
        write(conf, conf_text(args.pghost, args.pgport, FRESH, ""))
        fresh_db(db, FRESH)
        rc, out = migrate(ctl, conf, *new_dirs)
        check.expect(rc == 0, "this tree migrates a new database", out)
        check_files(db, FRESH, fdir)
        first = schema(db, FRESH)
        rc, out = migrate(ctl, conf, *new_dirs)
        check.expect(rc == 0 and schema(db, FRESH) == first and
                     out.count("0 migrations applied") == 2,
                     "migrate a second time: no migration applied, the functions "
                     "and the schema unchanged", out)
        upgrade(db, args, tmp, args.base_idemctl or ctl, ctl, new_dirs)
        atomic(db, args, tmp, ctl)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        for name in (UPGRADE, FRESH, SCRATCH):
            db.sql("DROP DATABASE IF EXISTS %s" % name, "postgres")
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
