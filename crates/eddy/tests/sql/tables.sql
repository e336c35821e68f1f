-- The tables every conformance script reads (${DATA} is this directory's data/).
CREATE TABLE clicks (
  `user` STRING,
  url STRING,
  amount DECIMAL(10, 2),
  qty INT,
  ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (
  'connector' = 'filesystem',
  'path' = '${DATA}/clicks.json',
  'format' = 'json'
);

CREATE TABLE users (
  name STRING,
  city STRING,
  born INT
) WITH (
  'connector' = 'filesystem',
  'path' = '${DATA}/users.csv',
  'format' = 'csv'
);

-- Changes of a product table as CDC messages (debezium-json and canal-json).
CREATE TABLE products_debezium (
  id INT,
  name STRING,
  price DECIMAL(10, 2),
  shelf STRING
) WITH (
  'connector' = 'filesystem',
  'path' = '${DATA}/products.debezium.json',
  'format' = 'debezium-json'
);

CREATE TABLE products_canal (
  id INT,
  name STRING,
  price DECIMAL(10, 2),
  shelf STRING
) WITH (
  'connector' = 'filesystem',
  'path' = '${DATA}/products.canal.json',
  'format' = 'canal-json'
);
