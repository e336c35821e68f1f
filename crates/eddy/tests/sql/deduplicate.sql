-- final
-- The last click of each user and url by event time, and the first of each user.
SELECT 'last' AS which, `user`, url, qty, ts
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY `user`, url ORDER BY ts DESC) AS rn FROM clicks)
WHERE rn = 1
UNION ALL
SELECT 'first', `user`, url, qty, ts
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY `user` ORDER BY ts ASC) AS rn FROM clicks)
WHERE rn <= 1
