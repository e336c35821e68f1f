CREATE TEMPORARY VIEW buys AS SELECT `user`, amount, ts FROM clicks WHERE url LIKE '%CHECKOUT%' OR url LIKE '/cart%';

WITH small AS (SELECT `user`, amount FROM buys WHERE amount < 10)
SELECT `user`, amount, 'small' AS kind FROM small
UNION ALL
SELECT name, CAST(born AS DECIMAL(10, 2)), 'user' FROM users
