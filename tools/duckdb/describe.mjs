#!/usr/bin/env node
// describe.mjs opens legorl Parquet files in DuckDB, the way a data scientist
// would, and prints one JSON object per file on its own line:
//
//   {"file": "...", "columns": [{"name": "...", "type": "INTEGER"}, ...],
//    "rows": 64, "extra": {...}}
//
// extra holds the file's key/value footer ("footer") and, for tables whose
// columns allow it, aggregates computed by DuckDB's own list functions
// ("segments": token counts, sampled tokens, logprob sum, routing ids;
// "rollouts": status counts and reward sum), so a caller can check them
// against values it computed itself.
//
// Usage: node describe.mjs FILE.parquet [FILE.parquet ...]
// Any error prints one line on stderr and exits with status 1.
import { DuckDBInstance } from '@duckdb/node-api';

// Aggregates per table, chosen by the columns a file has. Every value is cast
// so that it comes back as a JS number (BIGINT) or float (DOUBLE).
const aggregates = [
  {
    name: 'segments',
    needs: ['prompt_token_ids', 'completion_token_ids', 'loss_mask', 'logprobs', 'routing_experts', 'routing_layers', 'routing_top_k'],
    sql: `SELECT
        CAST(coalesce(sum(len(prompt_token_ids)), 0) AS BIGINT)     AS prompt_tokens,
        CAST(coalesce(sum(len(completion_token_ids)), 0) AS BIGINT) AS completion_tokens,
        CAST(coalesce(sum(list_sum(loss_mask)), 0) AS BIGINT)       AS sampled_tokens,
        CAST(coalesce(sum(list_sum(logprobs)), 0) AS DOUBLE)        AS logprob_sum,
        CAST(coalesce(sum(list_sum(list_transform(list_zip(logprobs, loss_mask), x -> x[1] * x[2]))), 0) AS DOUBLE) AS sampled_logprob_sum,
        CAST(coalesce(sum(len(routing_experts)), 0) AS BIGINT)      AS routing_ids,
        CAST(coalesce(max(list_max(routing_experts)), -1) AS BIGINT) AS routing_max_expert,
        CAST(count(*) FILTER (WHERE len(routing_experts) =
            (len(prompt_token_ids) + len(completion_token_ids)) * routing_layers * routing_top_k) AS BIGINT) AS routing_shape_ok,
        CAST(count(*) FILTER (WHERE len(logprobs) = len(completion_token_ids)
            AND len(loss_mask) = len(completion_token_ids)) AS BIGINT) AS lengths_ok
      FROM read_parquet(?)`,
  },
  {
    name: 'rollouts',
    needs: ['status', 'reward', 'f2p_passed'],
    sql: `SELECT
        CAST(count(*) FILTER (WHERE status = 'completed') AS BIGINT) AS completed,
        CAST(count(*) FILTER (WHERE status = 'masked') AS BIGINT)    AS masked,
        CAST(coalesce(sum(reward), 0) AS DOUBLE)                     AS reward_sum,
        CAST(coalesce(sum(len(f2p_passed)), 0) AS BIGINT)            AS f2p_passed
      FROM read_parquet(?)`,
  },
];

function jsonValue(v) {
  if (typeof v === 'bigint') {
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER)) {
      return v.toString();
    }
    return Number(v);
  }
  return v;
}

async function rowObjects(conn, sql, params) {
  const reader = await conn.runAndReadAll(sql, params);
  return reader.getRowObjectsJS();
}

async function describe(conn, file) {
  const cols = await rowObjects(conn, 'DESCRIBE SELECT * FROM read_parquet(?)', [file]);
  const columns = cols.map((c) => ({ name: String(c.column_name), type: String(c.column_type) }));
  const [{ n }] = await rowObjects(conn, 'SELECT count(*) AS n FROM read_parquet(?)', [file]);
  const extra = {};
  const kv = await rowObjects(conn,
    'SELECT decode(key) AS key, decode(value) AS value FROM parquet_kv_metadata(?) ORDER BY key', [file]);
  extra.footer = Object.fromEntries(kv.map((r) => [r.key, r.value]));
  const names = new Set(columns.map((c) => c.name));
  for (const agg of aggregates) {
    if (agg.needs.every((c) => names.has(c))) {
      const [row] = await rowObjects(conn, agg.sql, [file]);
      extra[agg.name] = Object.fromEntries(Object.entries(row).map(([k, v]) => [k, jsonValue(v)]));
    }
  }
  return { file, columns, rows: jsonValue(n), extra };
}

async function main(files) {
  if (files.length === 0) {
    throw new Error('usage: node describe.mjs FILE.parquet [FILE.parquet ...]');
  }
  // No network: fail at once instead of trying to download an extension.
  const instance = await DuckDBInstance.create(':memory:', {
    autoinstall_known_extensions: 'false',
    threads: '2',
  });
  const conn = await instance.connect();
  try {
    for (const file of files) {
      let out;
      try {
        out = await describe(conn, file);
      } catch (err) {
        throw new Error(`${file}: ${err.message}`);
      }
      process.stdout.write(JSON.stringify(out) + '\n');
    }
  } finally {
    conn.closeSync();
    instance.closeSync();
  }
}

main(process.argv.slice(2)).catch((err) => {
  const msg = String(err && err.message ? err.message : err).replace(/\s+/g, ' ').trim();
  process.stderr.write(`describe.mjs: ${msg}\n`);
  process.exit(1);
});
