#!/usr/bin/env python3
"""Writes expected/<script>.txt: what Apache Flink 2.3 (shared/flink-sql-oracle) prints for
tables.sql + <script>.sql over data/, its rows sorted; for a script whose first line is
`-- final` (an updating result), the table left once its changelog is applied (--final). Run after changing a script or the
data; the `sql` test of the eddy crate compares eddy's rows with these."""
import re, subprocess, sys, tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORACLE = HERE.parents[4] / "shared" / "flink-sql-oracle" / "flink-sql-oracle"
names = sys.argv[1:] or sorted(p.stem for p in HERE.glob("*.sql") if p.stem != "tables")
for name in names:
    script = (HERE / "tables.sql").read_text() + "\n" + (HERE / f"{name}.sql").read_text()
    script = script.replace("${DATA}", str(HERE / "data"))
    final = (HERE / f"{name}.sql").read_text().startswith("-- final")
    with tempfile.TemporaryDirectory() as tmp:
        path, out = Path(tmp) / "script.sql", Path(tmp) / "out.txt"
        path.write_text(script)
        subprocess.run([str(ORACLE), str(path), str(out)] + (["--final"] if final else []), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rows = sorted(re.sub(r"^[0-9]+> ", "", l) for l in out.read_text().splitlines() if l.strip())
    (HERE / "expected" / f"{name}.txt").write_text("".join(r + "\n" for r in rows))
    print(f"{name}: {len(rows)} rows")
