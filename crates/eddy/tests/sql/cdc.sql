-- final
-- Changes read from CDC messages (debezium-json and canal-json files): the tables they
-- leave, and an aggregation per shelf over both that follows every change.
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

CREATE VIEW products AS
SELECT * FROM products_debezium UNION ALL SELECT * FROM products_canal;

SELECT 'row' AS k, name, price, CAST(NULL AS BIGINT) AS n FROM products
UNION ALL
SELECT 'shelf', shelf, SUM(price), COUNT(*) FROM products GROUP BY shelf
