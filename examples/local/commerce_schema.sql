-- Keyspace `commerce`, sharded -80 / 80-: applied to every shard on the cluster's first start.
-- No seed rows here: a row must live on the shard its primary vindex picks, which the proxy
-- decides on insert.

CREATE TABLE customer (
  customer_id BIGINT NOT NULL,
  email VARBINARY(128),
  tenant_id BIGINT,
  created_at DATETIME(6),
  PRIMARY KEY (customer_id)
) ENGINE=InnoDB;

CREATE TABLE corder (
  order_id BIGINT NOT NULL,
  customer_id BIGINT,
  sku VARBINARY(128),
  price BIGINT,
  PRIMARY KEY (order_id),
  KEY corder_customer_id (customer_id)
) ENGINE=InnoDB;

-- A Vitess message table (times are Unix nanoseconds; time_next defaults to 0 so a new row is
-- picked up by the poller, which never matches NULL).
CREATE TABLE customer_events (
  id BIGINT NOT NULL,
  priority TINYINT NOT NULL DEFAULT 50,
  epoch BIGINT NOT NULL DEFAULT 0,
  time_next BIGINT DEFAULT 0,
  time_acked BIGINT DEFAULT NULL,
  tenant_id BIGINT,
  message JSON,
  PRIMARY KEY (id),
  INDEX poller_idx (time_acked, priority, time_next DESC)
) ENGINE=InnoDB
  COMMENT 'vitess_message,vt_ack_wait=30,vt_purge_after=86400,vt_batch_size=10,vt_cache_size=10000,vt_poller_interval=1';
