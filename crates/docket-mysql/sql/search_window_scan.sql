-- search_window_scan: how many jobs the window below the cursor holds and its lowest id
-- (the next window starts below it). Parameters: keyset id (twice), the window.
SELECT COUNT(*) AS scanned, MIN(id) AS scan_end
FROM (SELECT id FROM jobs WHERE (?1 IS NULL OR id < ?1) ORDER BY id DESC LIMIT ?2) w
