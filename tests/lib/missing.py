"""missing.py - one rule for a check that cannot run for want of a tool:
in CI (CI=true, where every tool is installed) that is a failure, and
elsewhere an explicit skip that is counted as one; never an exit status
that reads as both."""

import os


def in_ci():
    return os.environ.get("CI", "").lower() == "true"


def missing_tool(name, why):
    """The TAP result line (without its number) for check NAME that
    cannot run because WHY, and whether it is a failure."""
    if in_ci():
        return "not ok - %s: %s (in CI every tool is installed)" \
            % (name, why), True
    return "ok - %s # SKIP %s" % (name, why), False
