"""Reads every rows.parquet of a store with pyarrow and DuckDB and prints what each saw."""

import glob
import json
import sys

import duckdb
import pyarrow.parquet as pq

store = sys.argv[1]
files = sorted(glob.glob(f"{store}/segments/*/rows.parquet"))
table = pq.read_table(files[0])
out = {
    "files": len(files),
    "pyarrow": {
        "columns": table.column_names,
        "rows": sum(pq.read_metadata(f).num_rows for f in files),
        "embedding_type": str(table.schema.field("embedding").type),
    },
}
con = duckdb.connect()
glob_pattern = f"{store}/segments/*/rows.parquet"
rows = con.execute(f"select count(*) from read_parquet('{glob_pattern}')").fetchone()[0]
by_type = dict(con.execute(f"select type, count(*) from read_parquet('{glob_pattern}') group by type").fetchall())
dim = con.execute(f"select len(embedding) from read_parquet('{glob_pattern}') limit 1").fetchone()[0]
newest = con.execute(
    f"select title from read_parquet('{glob_pattern}') where type = 'commit' order by updated_at desc limit 1"
).fetchone()[0]
out["duckdb"] = {"rows": rows, "by_type": by_type, "dim": dim, "newest_commit_title": newest}
print(json.dumps(out))
