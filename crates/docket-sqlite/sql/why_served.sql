-- why_served: whether a live worker (unexpired at ?2) serves queue ?1.
SELECT EXISTS (SELECT 1 FROM workers w, json_each(w.queues) q
               WHERE w.expires_at > ?2 AND q.value = ?1)
