// Package monitor is the dashboard of legorl runs: a web page served by
// `legorl monitor`, drawn from the same Parquet files the trainer reads.
//
// It reads a store only through manifests: a run's newest manifest
// versions name its files, each file is read once (a file is written once
// and checked by sha256) and cached, and a new manifest version is seen
// within Options.Poll (2 s) of its commit, while a page is open. The page
// polls /api/runs/RUN/status and redraws its panels when the version
// changes. Charts are SVG drawn by the server; the page's only script is
// the refresh (assets/app.js); every asset is embedded, so the dashboard
// works offline.
//
// Bad input never takes the page down: every panel reports its own state
// (ok, partial or missing) with the problems that made it so, naming the
// table, the file and the reason: a run with no manifest yet, a table with
// no committed file, a file whose sha256 does not match its manifest, an
// undecodable file or manifest. The rest of the page shows what could be
// read.
//
// # Panels and their definitions
//
//   - overview: the run's manifests (stage, iteration, version, commit
//     time) and, per table, files read of committed, rows and problems.
//   - reward: per harness (and "all") and iteration, the pass rate: the
//     share of completed rollouts with reward 1; the mean reward of
//     completed rollouts. Masked rollouts are not rewards of 0: they are
//     counted apart.
//   - outcomes: per iteration, completed rollouts solved or failed, a
//     failure classified by the first that holds of max_turns (the turn
//     budget ran out), no_diff (diff_bytes 0), regression (a PASS_TO_PASS
//     test failed), fix_failed (a FAIL_TO_PASS test failed), other; masked
//     rollouts by termination with their most frequent errors; and the
//     rollouts that gave no gradient: the completed rollouts of
//     zero-variance groups (every completed reward of the task group equal,
//     a lone rollout included), as the trainer's GRPO advantages define it.
//   - turns: turns per episode of completed rollouts: mean, nearest-rank
//     p10/p50/p90, max per iteration, and the newest iteration's histogram.
//   - response: response lengths from the segments table: each LLM call's
//     response is a run of sampled tokens (loss mask 1) in a segment's
//     completion, and an episode's length is its sampled tokens.
//   - tools: per iteration over completed rollouts, tool calls per turn
//     (num_tool_calls / num_turns) and tool-call parse failures per turn
//     (tool_parse_failures / num_turns). The alarm: tool use collapsed in
//     an iteration whose tool calls per turn fall below
//     Options.ToolCollapse (0.5) times the rate of the first iteration with
//     a completed turn.
//   - verify: the edit-then-verify rate, from the steps table: of the
//     rollouts with an edit turn, the share in which some edit turn is
//     followed, later in the episode, by a verify turn. ToolKind says which
//     tool names edit (edit, write, str_replace, apply_patch, ...) and which
//     verify (view, read, cat, bash, shell, run_tests, ...).
//   - logprobs: per optimizer step, the trainer's train-inference check
//     (Pearson, Spearman, mean and max absolute difference, IS-ratio mean,
//     min and max, ESS) from train_steps; and, when a RecomputedSource
//     finds the trainer's recomputed logprobs, per iteration the Pearson
//     correlation and differences over every sampled token, computed here,
//     with a scatter of an even sample of them.
//   - training: loss, grad norm, entropy, KL and clip fraction per step.
//   - tasks: the solve grid: per task and iteration, solved / completed.
//   - rollouts: the rollouts of an iteration (or of one task in it), each a
//     link to the trajectory viewer: the rollout's row, its segments
//     (token counts, mask runs, forks: a segment whose prompt is not the
//     previous segment's prompt plus completion) and its steps.
package monitor
