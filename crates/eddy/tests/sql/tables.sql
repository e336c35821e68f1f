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
