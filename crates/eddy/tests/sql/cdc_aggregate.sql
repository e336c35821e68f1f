-- final
-- The sums per shelf of a product table's debezium-json changes (the Kafka test sends the
-- same changes through a topic into upsert-kafka and compares with this); the table is
-- declared in tables.sql.
SELECT shelf, SUM(price) AS total, COUNT(*) AS n FROM products_debezium GROUP BY shelf
