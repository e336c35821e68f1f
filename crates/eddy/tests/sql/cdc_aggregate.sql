-- final
-- The sums per shelf of a product table's debezium-json changes (the Kafka test sends the
-- same changes through a topic into upsert-kafka and compares with this).
CREATE TABLE products (
  id INT,
  name STRING,
  price DECIMAL(10, 2),
  shelf STRING
) WITH (
  'connector' = 'filesystem',
  'path' = '${DATA}/products.debezium.json',
  'format' = 'debezium-json'
);

SELECT shelf, SUM(price) AS total, COUNT(*) AS n FROM products GROUP BY shelf
