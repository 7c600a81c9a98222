-- batch_close: closes a batch through batch_close() (migration 0031); its callbacks are
-- enqueued now when every member has already ended.
-- Parameters: $1 bigint batch id.
SELECT {{schema}}.batch_close($1)
