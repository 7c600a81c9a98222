-- depth_top: the highest job id now (the next sample's high-water mark); 0 for no job.
SELECT coalesce(max(id), 0) AS hwm FROM jobs
