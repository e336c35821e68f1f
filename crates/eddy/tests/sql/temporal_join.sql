-- An event-time temporal join: each click meets the price its url had at the click's
-- time (a versioned table: a primary key and a watermark), inner and left.
CREATE TABLE url_prices (
  url STRING,
  price DECIMAL(10, 2),
  ts TIMESTAMP(3),
  PRIMARY KEY (url) NOT ENFORCED,
  WATERMARK FOR ts AS ts
) WITH (
  'connector' = 'filesystem',
  'path' = '${DATA}/url_prices.json',
  'format' = 'json'
);

SELECT c.`user`, c.url, c.ts, p.price, p.ts
FROM clicks AS c
JOIN url_prices FOR SYSTEM_TIME AS OF c.ts AS p ON c.url = p.url
UNION ALL
SELECT c.`user`, c.url, c.ts, p.price, p.ts
FROM clicks AS c
LEFT JOIN url_prices FOR SYSTEM_TIME AS OF c.ts AS p ON c.url = p.url AND p.price > 2
WHERE c.qty = 1
