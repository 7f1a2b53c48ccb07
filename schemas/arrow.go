package schemas

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// ArrowSchema returns the Arrow schema that readers see for table t: the
// documented column names and types. Files written from the row types read
// back with exactly this schema (a test checks it). Columns are not nullable;
// list elements are named "element", as Parquet's LIST convention has it.
func ArrowSchema(t Table) (*arrow.Schema, error) {
	var fs []arrow.Field
	switch t {
	case TableRollouts:
		fs = []arrow.Field{
			col("run_id", utf8), col("iteration", i32), col("task_id", utf8),
			col("group_id", utf8), col("rollout_id", utf8), col("harness", utf8),
			col("policy_version", i64), col("seed", i64), col("status", utf8),
			col("termination", utf8), col("reward", f64),
			col("f2p_passed", list(utf8)), col("f2p_failed", list(utf8)),
			col("p2p_passed", list(utf8)), col("p2p_failed", list(utf8)),
			col("num_turns", i32), col("num_llm_calls", i32), col("num_tool_calls", i32),
			col("tool_parse_failures", i32),
			col("setup_seconds", f64), col("agent_seconds", f64), col("llm_seconds", f64),
			col("tools_seconds", f64), col("grade_seconds", f64),
			col("diff_bytes", i64), col("flags", list(utf8)), col("error", utf8),
			col("started_at_ms", i64),
		}
	case TableSegments:
		fs = []arrow.Field{
			col("run_id", utf8), col("iteration", i32), col("rollout_id", utf8),
			col("segment_index", i32), col("first_call", i32), col("last_call", i32),
			col("prompt_token_ids", list(i32)), col("completion_token_ids", list(i32)),
			col("loss_mask", list(arrow.PrimitiveTypes.Int8)),
			col("logprobs", list(arrow.PrimitiveTypes.Float32)),
			col("routing_experts", list(arrow.PrimitiveTypes.Int16)),
			col("routing_layers", i32), col("routing_top_k", i32),
			col("policy_version", i64), col("policy_versions", list(i64)),
			col("finish_reason", utf8),
			col("temperature", arrow.PrimitiveTypes.Float32),
			col("top_p", arrow.PrimitiveTypes.Float32), col("top_k", i32),
		}
	case TableSteps:
		fs = []arrow.Field{
			col("run_id", utf8), col("iteration", i32), col("rollout_id", utf8),
			col("turn", i32), col("tool_name", utf8), col("arguments", utf8),
			col("observation_bytes", i64), col("exit_code", i32),
			col("parse_failure", arrow.FixedWidthTypes.Boolean), col("seconds", f64),
		}
	case TableTrainSteps:
		fs = []arrow.Field{
			col("run_id", utf8), col("iteration", i32), col("step", i32),
			col("policy_version", i64), col("loss", f64), col("grad_norm", f64),
			col("lr", f64), col("clip_fraction", f64), col("entropy", f64), col("kl", f64),
			col("logprob_pearson", f64), col("logprob_spearman", f64),
			col("logprob_mean_abs_diff", f64), col("logprob_max_abs_diff", f64),
			col("is_ratio_mean", f64), col("is_ratio_min", f64), col("is_ratio_max", f64),
			col("ess", f64), col("tokens", i64), col("sequences", i32),
			col("tokens_per_second", f64),
		}
	case TableReplay:
		fs = []arrow.Field{
			col("run_id", utf8), col("iteration", i32), col("rollout_id", utf8),
			col("task_id", utf8), col("harness", utf8), col("job_id", utf8),
			col("reproduced", arrow.FixedWidthTypes.Boolean), col("mismatch", utf8), col("detail", utf8),
			col("divergent_call", i32), col("divergent_token", i32),
			col("calls_recorded", i32), col("calls_served", i32),
			col("reward", f64), col("replayed_reward", f64),
			col("termination", utf8), col("replayed_termination", utf8),
			col("num_turns", i32), col("replayed_num_turns", i32),
			col("num_tool_calls", i32), col("replayed_num_tool_calls", i32),
			col("diff_bytes", i64), col("replayed_diff_bytes", i64),
			col("diff_sha256", utf8), col("replayed_diff_sha256", utf8),
			col("seconds", f64), col("replayed_at_ms", i64),
		}
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnknownTable, string(t))
	}
	return arrow.NewSchema(fs, nil), nil
}

var (
	utf8 = arrow.BinaryTypes.String
	i32  = arrow.PrimitiveTypes.Int32
	i64  = arrow.PrimitiveTypes.Int64
	f64  = arrow.PrimitiveTypes.Float64
)

func col(name string, t arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: t}
}

func list(elem arrow.DataType) arrow.DataType {
	return arrow.ListOfField(arrow.Field{Name: "element", Type: elem})
}
