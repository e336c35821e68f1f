SELECT c.`user`, u.city, u.born, c.url, c.qty
FROM clicks AS c JOIN users AS u ON c.`user` = u.name
WHERE u.born > 1991 AND c.qty >= 3
