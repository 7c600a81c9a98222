-- enqueue_copy_ids: ids and the transaction's clock for a COPY batch of $1 jobs.
-- Parameters: $1 int count.
-- Runs first in the COPY batch's transaction: now() is the transaction start, exactly what the
-- column default and `now() + delay` in enqueue_many would use, so both paths schedule alike.
-- Ids come from the table's own sequence (resolved once, not per row).
SELECT now() AS now, array_agg(nextval(s.seq) ORDER BY g) AS ids
FROM (SELECT pg_get_serial_sequence('{{schema}}.jobs', 'id')::regclass AS seq) s
CROSS JOIN generate_series(1, $1) AS g
