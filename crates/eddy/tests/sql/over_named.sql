-- OVER aggregations over a named window (`WINDOW w AS (…)`).
SELECT `user`, ts, SUM(qty) OVER w AS last3, MAX(amount) OVER w AS top3
FROM clicks
WINDOW w AS (PARTITION BY `user` ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)
