-- outbox_heads: what a relay's claim may take, oldest first: unkeyed unpublished messages
-- and each key's oldest unpublished one, whose available_at has passed. Keys are found in
-- the oldest 2,000 unpublished keyed messages by a window function (a key's earlier
-- messages are older still, so inside the window): no probe per message. Read without
-- locks; outbox_lock then takes what no other relay holds.
-- Parameters: ?1 now (ms), ?2 limit, ?3 1 only under the mutant outbox_key_pipelined
--   (docket_core::mutants; always 0 otherwise), ?4 unused here (MariaDB's candidates; the
--   single writer claims alone).
SELECT id FROM (
    SELECT w.id, w.available_at,
           row_number() OVER (PARTITION BY w.key ORDER BY w.id) AS turn
    FROM (SELECT id, key, available_at FROM outbox
          WHERE published_at IS NULL AND key IS NOT NULL
          ORDER BY id LIMIT 2000) w
) k
WHERE (k.turn = 1 OR ?3 = 1) AND k.available_at <= ?1
UNION ALL
SELECT id FROM (
    SELECT id FROM outbox
    WHERE published_at IS NULL AND key IS NULL AND available_at <= ?1
    ORDER BY id LIMIT ?2
)
ORDER BY id
LIMIT ?2
