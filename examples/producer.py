#!/usr/bin/env python3
"""A producer in another language: enqueue Docket jobs from Python through the SQL function.

It connects as a login role that is only a member of `<schema>_app` (made by
`docket grant`): that role may call `<schema>.enqueue(...)` and nothing else of Docket's —
it cannot read, change or delete jobs. The job is enqueued in the producer's own
transaction, so it exists iff that transaction commits.

    pip install 'psycopg[binary]'
    docket grant                                     # once, as the schema's owner
    psql -c "CREATE ROLE signup_service LOGIN PASSWORD '…' IN ROLE docket_app"
    DATABASE_URL=postgres://signup_service:…@host/db python3 examples/producer.py ada@example.com

Environment: DATABASE_URL (required), DOCKET_SCHEMA (default `docket`). Arguments: e-mail
addresses, one job each. Prints one line per job: `<job id> <email>`.
"""

import json
import os
import re
import sys

import psycopg
from psycopg import sql


def main() -> int:
    url = os.environ.get("DATABASE_URL")
    if not url:
        print("set DATABASE_URL to the producer role's connection string", file=sys.stderr)
        return 2
    schema = os.environ.get("DOCKET_SCHEMA", "docket")
    # The schema name becomes an identifier in SQL: checked as Docket checks it, and quoted.
    if not re.fullmatch(r"[a-z0-9_]{1,48}", schema):
        print(f"DOCKET_SCHEMA: 1-48 of a-z 0-9 _, got {schema!r}", file=sys.stderr)
        return 2
    emails = sys.argv[1:]
    if not emails:
        print("usage: producer.py EMAIL...", file=sys.stderr)
        return 2
    enqueue = sql.SQL("SELECT id FROM {}.enqueue(%s, %s, %s::jsonb)").format(
        sql.Identifier(schema)
    )
    with psycopg.connect(url) as conn:  # one transaction, committed when the block ends
        with conn.cursor() as cur:
            for n, email in enumerate(emails):
                # Job data is bound as a parameter, never pasted into the statement.
                args = json.dumps({"user_id": 100_000 + n, "email": email})
                cur.execute(enqueue, ("mail", "send_welcome", args))
                (job_id,) = cur.fetchone()
                print(job_id, email)
    return 0


if __name__ == "__main__":
    sys.exit(main())
