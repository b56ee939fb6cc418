"""Reads duet-bench's CSV back with Python's csv module (RFC 4180) and checks
it against the JSON of the same run: one header, every row as many fields,
the same values (a result's, then the run's copy ceiling on every row; an
empty field where the JSON has null).

usage: check_bench_csv.py BENCH.csv BENCH.json
Exits 0 when they agree, 1 with one line saying where they do not.
"""
import csv
import json
import sys

RESULT_COLUMNS = ["op", "dtype", "rows", "cols", "variant", "median_ms", "min_ms", "max_ms", "gbps", "ratio",
                  "check_error"]
COPY_COLUMNS = ["copy_gbps", "copy_source", "copy_memcpy_gbps", "copy_kernel_gbps"]
COLUMNS = RESULT_COLUMNS + COPY_COLUMNS


def check(csv_path, json_path):
    with open(csv_path, newline="", encoding="utf-8") as f:
        table = list(csv.reader(f, strict=True))
    with open(json_path, encoding="utf-8") as f:
        doc = json.load(f)
    results = doc["results"]
    if not table or table[0] != COLUMNS:
        return f"header {table[:1]} is not {COLUMNS}"
    rows = table[1:]
    if len(rows) != len(results):
        return f"{len(rows)} rows, the JSON has {len(results)} results"
    for n, (row, want) in enumerate(zip(rows, results), start=2):
        if len(row) != len(COLUMNS):
            return f"line {n}: {len(row)} fields, the header has {len(COLUMNS)}: {row}"
        for key, field in zip(COLUMNS, row):
            value = want[key] if key in RESULT_COLUMNS else doc[key]
            if value is None:
                same = field == ""
            elif isinstance(value, str):
                same = field == value
            else:
                same = float(field) == float(value)
            if not same:
                return f"line {n}: {key} = {field!r}, the JSON says {value!r}"
    return None


if __name__ == "__main__":
    problem = check(sys.argv[1], sys.argv[2])
    if problem:
        print(f"check_bench_csv: {problem}")
        sys.exit(1)
    print(f"check_bench_csv: {sys.argv[1]} agrees with {sys.argv[2]}")
