-- A message table of your own (run through the proxy in the `lookup` keyspace, or on every
-- shard of a sharded keyspace plus a vschema entry with a hash vindex on id).
-- Times are Unix nanoseconds; time_next = 0 means "due now".
CREATE TABLE email_jobs (
  id BIGINT NOT NULL,
  priority TINYINT NOT NULL DEFAULT 50,
  epoch BIGINT NOT NULL DEFAULT 0,
  time_next BIGINT DEFAULT 0,
  time_acked BIGINT DEFAULT NULL,
  recipient VARCHAR(255),
  body TEXT,
  PRIMARY KEY (id),
  INDEX poller_idx (time_acked, priority, time_next DESC)
) ENGINE=InnoDB
  COMMENT 'vitess_message,vt_ack_wait=30,vt_purge_after=86400,vt_batch_size=10,vt_cache_size=10000,vt_poller_interval=1,vt_max_attempts=5';

-- The same through the proxy's CREATE QUEUE (beyond Vitess):
--   CREATE QUEUE email_jobs (recipient VARCHAR(255), body TEXT) WITH (vt_max_attempts=5);
