"""Reads every rows.parquet of a store with pyarrow and DuckDB and prints what each saw."""

import glob
import json
import sys

import duckdb
import numpy as np
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
# Nearest neighbours offline: the i8 vectors cast to float, cosine in DuckDB (docs/offline.md),
# against the same cosine in numpy over pyarrow's copy of the column.
first_id = table.column("id")[0].as_py()
near = con.execute(
    f"""select id, list_cosine_similarity(embedding::FLOAT[],
          (select embedding::FLOAT[] from read_parquet('{glob_pattern}') where id = ?)) as cos
        from read_parquet('{glob_pattern}') order by cos desc, id limit 5""",
    [first_id],
).fetchall()
all_rows = pq.read_table(files, columns=["id", "embedding"])
emb = all_rows.column("embedding").combine_chunks()
m = emb.values.to_numpy(zero_copy_only=False).astype(np.float32).reshape(-1, emb.type.list_size)
m /= np.linalg.norm(m, axis=1, keepdims=True)
cos = m @ m[0]
ids = all_rows.column("id").to_pylist()
order = sorted(range(len(ids)), key=lambda i: (-round(float(cos[i]), 6), ids[i]))[:5]
out["duckdb"] = {"rows": rows, "by_type": by_type, "dim": dim, "newest_commit_title": newest,
                 "nearest_to_first": [r[0] for r in near], "self_cosine": near[0][1]}
out["numpy"] = {"nearest_to_first": [ids[i] for i in order], "first_id": first_id}
print(json.dumps(out))
