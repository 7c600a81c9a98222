-- idle_bound: bounds how long the server keeps this transaction open while its client says
-- nothing (idle_in_transaction_session_timeout, for this transaction only).
-- Parameters: $1 text milliseconds ('0' for no bound).
-- Invariant: runs first in each of Docket's own multi-statement transactions. A client cut
-- off between two statements leaves its transaction open on the server, which cannot tell a
-- silent client from a slow one; past the bound the server ends the connection, rolls the
-- transaction back and releases its row locks, instead of holding them until TCP gives up.
SELECT set_config('idle_in_transaction_session_timeout', $1, true)
