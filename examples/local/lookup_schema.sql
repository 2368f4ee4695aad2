-- Keyspace `lookup`, unsharded (shard 0): sequences, the lookup vindex table and reference data.

-- Vitess sequence tables: one row holding the next id to hand out and the block size to cache.
CREATE TABLE customer_seq (
  id INT,
  next_id BIGINT,
  cache BIGINT,
  PRIMARY KEY (id)
) COMMENT 'vitess_sequence';
INSERT INTO customer_seq (id, next_id, cache) VALUES (0, 1, 100);

CREATE TABLE corder_seq (
  id INT,
  next_id BIGINT,
  cache BIGINT,
  PRIMARY KEY (id)
) COMMENT 'vitess_sequence';
INSERT INTO corder_seq (id, next_id, cache) VALUES (0, 1, 100);

-- Backing table of the owned consistent_lookup_unique vindex commerce.corder_order_id_lkp.
CREATE TABLE corder_order_id_idx (
  order_id BIGINT NOT NULL,
  keyspace_id VARBINARY(10),
  PRIMARY KEY (order_id)
) ENGINE=InnoDB;

CREATE TABLE product (
  sku VARBINARY(128) NOT NULL,
  description VARCHAR(128),
  price BIGINT,
  PRIMARY KEY (sku)
) ENGINE=InnoDB;
INSERT INTO product (sku, description, price) VALUES
  ('SKU-1001', 'monitor', 100),
  ('SKU-1002', 'keyboard', 30),
  ('SKU-1003', 'mouse; wireless', 25),
  ('SKU-1004', 'USB-C cable, 2 m', 12);
