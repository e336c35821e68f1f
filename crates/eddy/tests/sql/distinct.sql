-- final
-- SELECT DISTINCT, UNION without ALL, and an aggregation without GROUP BY.
SELECT DISTINCT `user`, qty FROM clicks WHERE qty > 2
UNION
SELECT url, CAST(COUNT(*) AS INT) FROM clicks GROUP BY url
UNION
SELECT 'all', CAST(COUNT(*) AS INT) FROM clicks
