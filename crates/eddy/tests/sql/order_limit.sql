-- final
-- ORDER BY … LIMIT over a stream (Flink's SortLimit): the three largest amounts, and the
-- two smallest (NULL first, as Flink orders it ascending), as the clicks leave them.
SELECT * FROM (
  SELECT `user`, url, amount, ts FROM clicks ORDER BY amount DESC, ts DESC LIMIT 3
)
UNION ALL
SELECT * FROM (
  SELECT `user`, url, amount, ts FROM clicks ORDER BY amount, ts LIMIT 2
)
