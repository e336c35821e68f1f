-- final
-- Changes read from CDC messages (debezium-json and canal-json files): the tables they
-- leave, and an aggregation per shelf over both that follows every change (the tables are
-- declared in tables.sql).
CREATE VIEW products AS
SELECT * FROM products_debezium UNION ALL SELECT * FROM products_canal;

SELECT 'row' AS k, name, price, CAST(NULL AS BIGINT) AS n FROM products
UNION ALL
SELECT 'shelf', shelf, SUM(price), COUNT(*) FROM products GROUP BY shelf
